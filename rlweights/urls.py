"""Dashboard URLs of the rlweights engine (mounted at /rlweights/)."""
from django.urls import path

from . import views

app_name = "rlweights"
urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("experiments/<int:pk>/", views.dashboard, name="experiment"),
]
