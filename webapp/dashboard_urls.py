"""Dashboard pages of the platform (namespace ``dashboard``)."""
from django.urls import path

from . import views

app_name = "dashboard"
urlpatterns = [
    path("", views.overview, name="overview"),
    path("experiments/", views.experiments, name="experiments"),
]
