"""Django models of the placement engine."""
from django.db import models  # noqa: F401
