"""webapp.services.database_lost: which failures of a run are a lost database (retried) rather
than a failure of the work (recorded). Values by construction: the errors are built here."""
from __future__ import annotations

import pytest
from django.db import InterfaceError, OperationalError

from webapp.experiments import ProgressReporter
from webapp.services import database_lost


def _wrapped(inner: BaseException, outer: type[Exception] = RuntimeError, *, explicit: bool = True) -> Exception:
    try:
        try:
            raise inner
        except BaseException as err:
            if explicit:
                raise outer("wrapped") from err
            raise outer("while handling")  # implicit context only
    except Exception as out:  # noqa: BLE001
        return out


@pytest.mark.parametrize(("err", "lost"), [
    (OperationalError("terminating connection due to administrator command"), True),
    (InterfaceError("connection already closed"), True),
    (_wrapped(OperationalError("server closed the connection")), True),
    (_wrapped(InterfaceError("connection already closed"), ValueError, explicit=False), True),
    (_wrapped(_wrapped(OperationalError("deep"))), True),
    (RuntimeError("terminating connection due to administrator command"), False),  # message alone proves nothing
    (ValueError("model has no tunable tasks"), False),
    (_wrapped(KeyError("x")), False),
])
def test_database_errors_anywhere_in_the_chain(err, lost):
    assert database_lost(err) is lost


def test_an_error_the_reporter_saw_counts_even_when_a_library_dropped_its_type():
    """TVM's FFI re-raises a callback's exception as RuntimeError(message) without a chain: the
    reporter's own note of the lost connection decides."""
    reporter = ProgressReporter(experiment=None)
    with pytest.raises(OperationalError):
        with reporter.database_call():
            raise OperationalError("connection failed: Connection refused")
    ffi = RuntimeError("connection failed: Connection refused")
    assert database_lost(ffi) is False
    assert database_lost(ffi, reporter) is True
    assert database_lost(ValueError("bad"), ProgressReporter(experiment=None)) is False


def test_other_errors_pass_through_the_reporter_unnoted():
    reporter = ProgressReporter(experiment=None)
    with pytest.raises(KeyError):
        with reporter.database_call():
            raise KeyError("x")
    assert reporter.database_error is None
