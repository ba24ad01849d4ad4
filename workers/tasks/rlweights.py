"""Celery tasks of the rlweights engine (thin: IDs in, one service call).

Weight-learning experiments need no task of their own: they run through the platform task
``tandem.run_experiment`` on the ``cpu`` queue, which calls the registered runner
:func:`rlweights.experiment.weight_learning_run`."""
