"""Django models of the rlweights engine."""
from django.db import models  # noqa: F401
