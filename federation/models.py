"""Django models of the federation engine."""
from django.db import models  # noqa: F401
