"""MetaSchedule's start-up checks of the local builder and runner run beside the caller
(tuning.backends.components._local_classes), yet a worker that cannot start still fails the
first build / run with the worker's own error, before any candidate is built or measured. Real
TVM worker processes; the initializer that cannot run is a builtin (``os.chdir`` into a
directory that does not exist), so it pickles by reference into the worker. Builder and runner
are made together: their checks run side by side, as in a tuning. The healthy path is every
tuning test's (tests/integration/tuning/test_pipeline_plug.py checks the runner's name)."""
import functools
import os

import pytest

from tuning.backends.components import _local_classes

MISSING = "/nonexistent/tandem-start-up-check"


def test_builder_and_runner_that_cannot_start_fail_their_first_call_with_the_workers_error():
    builder_cls, runner_cls = _local_classes()
    cannot = functools.partial(os.chdir, MISSING)
    builder = builder_cls(max_workers=1, timeout_sec=120, initializer=cannot)  # TVM's own would raise here
    runner = runner_cls(timeout_sec=120, initializer=cannot)
    try:
        with pytest.raises(Exception, match="tandem-start-up-check"):
            builder.build([])
        with pytest.raises(Exception, match="tandem-start-up-check"):
            runner.run([])
    finally:
        runner.pool.shutdown(wait=False)

