"""Django models of the tuning engine."""
from django.db import models  # noqa: F401
