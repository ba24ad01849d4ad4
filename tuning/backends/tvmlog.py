"""MetaSchedule's logging set-up, made safe next to handlers TVM did not create.

``extracted_tasks_to_tune_contexts`` and ``tune_tir`` call
``tvm.s_tir.meta_schedule.logging.create_loggers``, which rebuilds the ``tvm.s_tir.meta_schedule``
logger with ``logging.config.dictConfig`` and lists, by name, every handler already on that
logger as one of its handlers. A handler TVM did not create breaks it: an unnamed one raises
``AttributeError: 'NoneType' object has no attribute 'format'`` (TVM formats each name), a named
one that is not in TVM's config raises ``ValueError: Unable to add handler``. Such handlers are
common: pytest's log capture attaches its (unnamed) handler to every non-propagating logger, and
TVM makes that logger non-propagating the first time it runs, so the second tuning run in one
process failed; an operator's own ``LOGGING`` entry for the logger would do the same.
"""
from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import Iterator

#: The logger MetaSchedule configures (``global_logger_name`` in TVM 0.27's ``create_loggers``).
TVM_LOGGER = "tvm.s_tir.meta_schedule"


#: Environment variable naming the level of MetaSchedule's console lines (default WARNING).
CONSOLE_LEVEL_ENV = "TANDEM_TVM_CONSOLE_LEVEL"


def console_level() -> int:
    """The level of MetaSchedule's console handler: ``TANDEM_TVM_CONSOLE_LEVEL`` (a logging level
    name: DEBUG, INFO, WARNING, ERROR), WARNING by default, so a tuning's terminal and worker log
    carry neither the per-round task tables (INFO) nor XGBoost's iterations (DEBUG). Every
    line still reaches the per-task log files under the tuning's ``logs/`` (TVM writes those at
    DEBUG). Raises ``ValueError`` on a name that is not a level."""
    name = os.environ.get(CONSOLE_LEVEL_ENV, "WARNING").strip().upper()
    level = logging.getLevelName(name)
    if not isinstance(level, int):
        raise ValueError(f"{CONSOLE_LEVEL_ENV}={name!r} is not a logging level (DEBUG, INFO, WARNING, ERROR)")
    return level


@contextmanager
def foreign_handlers_detached(name: str = TVM_LOGGER, console: int | None = None) -> Iterator[list[logging.Handler]]:
    """Detach from logger ``name`` every handler whose name does not start with ``name`` (those
    TVM's ``create_loggers`` did not make) for the duration of the block, then attach them again
    (after TVM's own, in their old order), so TVM's ``dictConfig`` sees only handlers it knows
    and the detached ones (pytest's capture, an operator's handler) keep receiving TVM's lines
    after the set-up. ``console``: a logging level for TVM's console handler (TVM 0.27 gives it
    the logger's level at set-up time, DEBUG when unset), or None to leave it. Yields the
    detached handlers. Raises nothing of its own."""
    logger = logging.getLogger(name)
    if console is not None:
        logger.setLevel(console)  # read by create_loggers for its console handler's level
    foreign = [h for h in logger.handlers if not (h.get_name() or "").startswith(name)]
    for handler in foreign:
        logger.removeHandler(handler)
    try:
        yield foreign
    finally:
        for handler in foreign:
            logger.addHandler(handler)
