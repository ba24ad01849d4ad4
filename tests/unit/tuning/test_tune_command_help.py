"""``manage.py tune --help`` names what --runner, --scheduler and --option accept."""
from __future__ import annotations

from tuning.backends.options import known_option_names, trimmer_only_option_names
from tuning.backends.registry import runner_names, scheduler_names
from tuning.management.commands.tune import Command


def _squeeze(text: str) -> str:
    """Without whitespace: argparse wraps help to the terminal's width (and after hyphens)."""
    return "".join(text.split())


def _help_text() -> str:
    return _squeeze(Command().create_parser("manage.py", "tune").format_help())


def test_help_lists_registered_runners_and_schedulers():
    text = _help_text()
    assert _squeeze(f"builder/runner pair: {', '.join(runner_names())}") in text
    assert _squeeze(f"task scheduler: {', '.join(scheduler_names())}") in text
    assert {"local", "doppler"} <= set(runner_names()) and {"gradient", "trimmer"} <= set(scheduler_names())


def test_help_lists_option_names_and_the_trimmer_only_ones():
    text = _help_text()
    assert _squeeze(f"Names: {', '.join(known_option_names())};") in text
    assert _squeeze(f"only with --scheduler trimmer: {', '.join(trimmer_only_option_names())};") in text
    assert "patience" in trimmer_only_option_names()
