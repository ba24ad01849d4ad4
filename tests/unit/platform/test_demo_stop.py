"""``manage.py demo`` stops where the operator stops it, and checks ``--addr`` even when it
will not serve (both found by a new user's try: Ctrl-C during the tuning step printed two
tracebacks and the demo went on to the next step; ``--addr notanaddr --no-serve`` ran the whole
demo again, resetting the operator's password)."""
from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from webapp.demo import DemoStep
from webapp.experiments import ExperimentCancelled
from webapp.management.commands import demo as demo_cmd


def _raised(outer: Exception, inner: BaseException) -> Exception:
    """``outer`` as raised ``from inner`` (what manage.py tune does with a cancel)."""
    try:
        try:
            raise inner
        except BaseException as err:
            raise outer from err
    except Exception as err:  # noqa: BLE001
        return err


def test_a_cancel_by_a_signal_is_recognised_through_the_chain():
    err = _raised(CommandError("tuning experiment 3 cancelled"), ExperimentCancelled("experiment 3 stopped by SIGINT"))
    assert demo_cmd.stopped_by_signal(err) == "experiment 3 stopped by SIGINT"
    assert demo_cmd.stopped_by_signal(_raised(CommandError("x"), KeyboardInterrupt())) == "Ctrl-C"
    # a step that failed on its own, or was cancelled through the API, does not stop the demo
    assert demo_cmd.stopped_by_signal(_raised(CommandError("x"), RuntimeError("boom"))) == ""
    assert demo_cmd.stopped_by_signal(ExperimentCancelled("experiment 3 cancelled by the user")) == ""


def test_parse_addr_gives_host_and_integer_port():
    from webapp.management.commands.serve import parse_addr

    assert parse_addr("127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert parse_addr("[::1]:80") == ("::1", 80)
    for bad in ("notanaddr", "host:0", "host:65536", ":8000", "host:8o"):
        with pytest.raises(CommandError, match="must be HOST:PORT"):
            parse_addr(bad)


def test_bad_addr_is_refused_with_no_serve_before_touching_the_database():
    # no django_db mark: a database access here would fail the test
    with pytest.raises(CommandError, match="must be HOST:PORT"):
        call_command("demo", "--no-serve", "--addr", "notanaddr")


@pytest.mark.django_db
def test_a_step_stopped_by_a_signal_ends_the_demo_and_later_steps_do_not_run(monkeypatch):
    ran = []

    def tuning(*, owner, stdout):
        ran.append("tuning")
        raise _raised(CommandError("tuning experiment 3 cancelled"), ExperimentCancelled("experiment 3 stopped by SIGINT"))

    def federation(*, owner, stdout):
        ran.append("federation")

    def failing(*, owner, stdout):
        ran.append("failing")
        raise RuntimeError("this engine failed on its own")

    steps = [DemoStep(order=i, name=n, run=f)
             for i, (n, f) in enumerate([("failing", failing), ("tuning", tuning), ("federation", federation)])]
    monkeypatch.setattr(demo_cmd, "demo_steps", lambda: steps)
    monkeypatch.setattr(demo_cmd, "DEMO_CLUSTERS", [])
    with pytest.raises(CommandError, match="demo stopped during step tuning: experiment 3 stopped by SIGINT"):
        call_command("demo", "--no-serve", "--password", "pw-demo-stop-1")
    assert ran == ["failing", "tuning"]  # a failure leaves the others to run; a stop ends the demo
