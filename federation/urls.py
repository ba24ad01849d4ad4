from django.urls import path

from . import views

app_name = "federation"
urlpatterns = [path("", views.dashboard, name="dashboard")]
