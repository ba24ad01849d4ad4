"""Tandem's Django project: settings, URLs, the platform models, the API root and the dashboard.

Importing the package is cheap and needs no Django or Celery (so ``webapp.plug`` serves Django-free
pipelines); the Celery app is loaded when Django starts (:meth:`webapp.apps.WebappConfig.ready`),
so ``@shared_task`` binds to it in the web process too.
"""
