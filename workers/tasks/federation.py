"""Celery tasks of the federation engine.

Both federation experiment kinds (``federation-plan``, ``federation-benchmark``) run through the
platform's generic ``tandem.run_experiment`` task on the ``cpu`` queue (see
``federation.apps.FederationConfig.ready``), so there is no engine-specific task here.
"""
