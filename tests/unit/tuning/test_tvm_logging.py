"""MetaSchedule's logger set-up next to a handler TVM did not create (the CI failure of stop 27:
pytest's log capture had attached its unnamed handler to the non-propagating TVM logger)."""
import logging

import pytest
from tvm.s_tir.meta_schedule.logging import get_loggers_from_work_dir

from tuning.backends.tvmlog import TVM_LOGGER, foreign_handlers_detached


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def foreign_handler():
    logger = logging.getLogger(TVM_LOGGER)
    handler = _Collect()  # unnamed, like pytest's LogCaptureHandler
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def test_tvm_set_up_fails_next_to_an_unnamed_handler_without_the_guard(tmp_path, foreign_handler):
    # the control: TVM 0.27 itself cannot cope, so the guard below is what makes the difference
    with pytest.raises(AttributeError, match="format"):
        get_loggers_from_work_dir(str(tmp_path), ["matmul"])


def test_guard_lets_tvm_set_up_and_keeps_the_foreign_handler(tmp_path, foreign_handler):
    with foreign_handlers_detached() as detached:
        # pytest's own capture handlers may be there too once TVM has run in this process
        assert foreign_handler in detached
        assert all(not (h.get_name() or "").startswith(TVM_LOGGER) for h in detached)
        assert foreign_handler not in logging.getLogger(TVM_LOGGER).handlers
        loggers = get_loggers_from_work_dir(str(tmp_path), ["matmul"])
    tvm_logger = logging.getLogger(TVM_LOGGER)
    assert foreign_handler in tvm_logger.handlers
    # TVM's own console and file handlers are there too, and the foreign one still hears TVM
    names = [h.get_name() for h in tvm_logger.handlers]
    assert f"{TVM_LOGGER}.console" in names and f"{TVM_LOGGER}.file" in names
    tvm_logger.info("after set-up")
    assert "after set-up" in foreign_handler.messages
    assert len(loggers) == 1 and (tmp_path / "logs").is_dir()
    # a second set-up in the same process (the failing case) works as well
    with foreign_handlers_detached():
        get_loggers_from_work_dir(str(tmp_path), ["matmul", "conv"])
