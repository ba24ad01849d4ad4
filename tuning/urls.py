"""Dashboard URLs of the tuning engine (mounted at /tuning/)."""
from django.urls import path

from . import views

app_name = "tuning"
urlpatterns = [path("", views.index, name="index")]
