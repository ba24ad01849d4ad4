"""Dashboard pages of the placement engine, mounted at /placement/."""
from django.urls import path

from . import views

app_name = "placement"
urlpatterns = [
    path("", views.index, name="index"),
    path("experiments/<int:pk>/", views.simulation_detail, name="simulation"),
]
