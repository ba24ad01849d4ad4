"""``manage.py tune``: tune a model's tensor programs with MetaSchedule, in this process.

Examples::

    manage.py tune --model resnet18 --target llvm --trials 200 --json
    manage.py tune --onnx onnx-light-models/light_squeezenet.onnx --trials 32
    manage.py tune --resume 12            # continue experiment 12 from its database

Creates a ``tuning`` experiment (visible in the dashboard and API), shows a tqdm progress bar,
and prints a summary (``--json``: one JSON object on stdout).
"""
from __future__ import annotations

import contextlib
import json
import signal
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from tqdm import tqdm

from webapp.experiments import ExperimentCancelled, ProgressReporter
from webapp.models import Experiment
from webapp.states import State


class TqdmReporter(ProgressReporter):
    """Progress reporter that also drives a tqdm bar, and ends the run at its next report once
    the process got SIGTERM or SIGINT (see :func:`_signals_stop_at_next_report`)."""

    def __init__(self, experiment: Experiment, bar: tqdm) -> None:
        super().__init__(experiment)
        self.bar = bar
        self.terminated_by: str | None = None  # a signal's name, set by its handler

    def report(self, percent: float, message: str = "") -> None:
        super().report(percent, message)
        self.bar.n = int(max(0, min(100, round(percent))))
        self.bar.set_postfix_str(message[:60], refresh=False)
        self.bar.refresh()
        if self.terminated_by:
            raise ExperimentCancelled(f"experiment {self.experiment.pk} stopped by {self.terminated_by}")


# what a second signal of the same kind does: Ctrl-C raises KeyboardInterrupt, SIGTERM kills
_SECOND = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}


@contextlib.contextmanager
def _signals_stop_at_next_report(reporter: TqdmReporter):
    """While active, a first SIGTERM (``kill``, a service manager) or SIGINT (Ctrl-C) makes
    ``reporter`` raise ``ExperimentCancelled`` at its next report, the point where a cancel from
    the API stops a tuning too (after the running round is mirrored; TVM unwinds its loop
    cleanly from there, whereas an exception raised by a signal handler at an arbitrary point
    inside TVM's loop crashed the process with a segfault). The experiment then ends
    ``cancelled`` with the signal named instead of staying ``running`` with nobody running it.
    The same signal again acts at once (Ctrl-C: KeyboardInterrupt; SIGTERM: terminate). Does
    nothing outside the main thread, where signals cannot be handled."""
    def _note(signum, frame):
        sig = signal.Signals(signum)
        reporter.terminated_by = sig.name
        signal.signal(sig, _SECOND[sig])
        print(f"{sig.name}: stopping after the running round (send it again to stop now)", file=sys.stderr, flush=True)

    try:
        previous = {sig: signal.signal(sig, _note) for sig in _SECOND}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Command(BaseCommand):
    help = "Tune a model (torchvision/transformers name, built-in, or ONNX) with TVM MetaSchedule."

    def add_arguments(self, parser):
        from tuning.backends.options import known_option_names, trimmer_only_option_names
        from tuning.backends.registry import runner_names, scheduler_names

        src = parser.add_mutually_exclusive_group(required=True)
        src.add_argument("--model", help="torchvision name (resnet18), transformers:<Config>, or mlp/matmul/convnet")
        src.add_argument("--onnx", help="ONNX file under data/ (relative to data/ or a path into it) or an upload id")
        src.add_argument("--resume", type=int, metavar="EXPERIMENT_ID", help="continue a tuning experiment from its database")
        parser.add_argument("--input-shape", help="comma-separated, e.g. 1,3,224,224")
        parser.add_argument("--target", default="llvm", choices=["llvm", "cuda"])
        parser.add_argument("--trials", type=int, help="total trial budget (candidates measured), default 64; with --resume: a new budget (e.g. the trials already done, to stop and just compile)")
        parser.add_argument("--trials-per-round", type=int, default=32, help="candidates per round (MetaSchedule batch), default 32")
        parser.add_argument("--max-trials-per-task", type=int)
        parser.add_argument("--max-tasks", type=int, help="tune only the N tasks with the most weighted FLOP")
        parser.add_argument("--runner", default="local",
                            help=f"builder/runner pair: {', '.join(runner_names())} (default: local)")
        parser.add_argument("--scheduler", default="gradient",
                            help=f"task scheduler: {', '.join(scheduler_names())} (default: gradient, "
                                 "MetaSchedule's own)")
        parser.add_argument("--cost-model", default="xgb", choices=["xgb", "random"])
        parser.add_argument("--threads", type=int, help="measurement threads (default: TANDEM_TUNING_THREADS or all cores)")
        parser.add_argument("--repeats", type=int, default=20, help="end-to-end latency repeats")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--seed-database", help="name of an imported database to start from")
        parser.add_argument("--force", action="store_true", help="use a database measured under another target")
        parser.add_argument("--no-eager", action="store_true",
                            help="skip the peer measurements (PyTorch eager and onnxruntime)")
        parser.add_argument("--no-onnxruntime", action="store_true",
                            help="skip only the onnxruntime peer (CPU execution provider, same threads)")
        parser.add_argument("--weight-prepack", dest="weight_prepack", action="store_true", default=None,
                            help="tune and build with weight prepacking (layout-free weights; default on llvm)")
        parser.add_argument("--no-weight-prepack", dest="weight_prepack", action="store_false",
                            help="tune and build without weight prepacking (default on cuda)")
        parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                            help="runner/scheduler option, e.g. builder_workers=1 (JSON values allowed; repeat "
                                 f"for several). Names: {', '.join(known_option_names())}; only with "
                                 f"--scheduler trimmer: {', '.join(trimmer_only_option_names())}; doppler, search and "
                                 "trimmer take a JSON object of settings (docs/engines/tuning.md)")
        parser.add_argument("--owner", default="cli", help="user owning the experiment (created if missing)")
        parser.add_argument("--json", action="store_true", help="print the summary as JSON")

    def handle(self, *args, **opts):
        from tuning.api import TuningParameters
        from tuning.experiment import tuning_experiment_run
        from webapp.management.migrated import require_migrated

        require_migrated()

        if opts["resume"] is not None:
            try:
                exp = Experiment.objects.get(pk=opts["resume"], kind="tuning")
            except Experiment.DoesNotExist:
                raise CommandError(f"no tuning experiment {opts['resume']}") from None
            if exp.is_terminal:
                raise CommandError(f"experiment {exp.pk} already {exp.state}")
            if opts["trials"] is not None:
                exp.parameters = {**exp.parameters, "trials": int(opts["trials"])}
                exp.save(update_fields=["parameters"])
        else:
            raw = {k: v for k, v in {
                "model": opts["model"], "onnx": opts["onnx"], "target": opts["target"], "trials": 64 if opts["trials"] is None else opts["trials"],
                "trials_per_round": opts["trials_per_round"], "max_trials_per_task": opts["max_trials_per_task"],
                "max_tasks": opts["max_tasks"], "runner": opts["runner"], "scheduler": opts["scheduler"],
                "cost_model": opts["cost_model"], "num_threads": opts["threads"], "repeats": opts["repeats"],
                "seed": opts["seed"], "seed_database": opts["seed_database"], "force_target": opts["force"],
                "measure_eager": not opts["no_eager"], "measure_onnxruntime": not opts["no_onnxruntime"],
                "weight_prepack": opts["weight_prepack"],
            }.items() if v is not None}
            if opts["option"]:
                options = {}
                for item in opts["option"]:
                    key, sep, value = item.partition("=")
                    if not sep:
                        raise CommandError(f"--option wants KEY=VALUE, not {item!r}")
                    try:
                        options[key] = json.loads(value)
                    except json.JSONDecodeError:
                        options[key] = value
                raw["options"] = options
            if opts["input_shape"]:
                try:
                    raw["input_shape"] = [int(x) for x in opts["input_shape"].split(",")]
                except ValueError:
                    raise CommandError(f"--input-shape wants comma-separated integers, e.g. 1,3,224,224; "
                                       f"got {opts['input_shape']!r}") from None
            ser = TuningParameters(data=raw)
            if not ser.is_valid():
                raise CommandError(json.dumps(ser.errors))
            owner, _ = get_user_model().objects.get_or_create(username=opts["owner"])
            exp = Experiment.objects.create(owner=owner, kind="tuning", parameters=json.loads(json.dumps(ser.validated_data)),
                                            name=f"tune {raw.get('model') or raw.get('onnx')}")
        with transaction.atomic():
            exp = Experiment.objects.select_for_update().get(pk=exp.pk)
            if exp.state == State.QUEUED:
                exp.transition_to(State.RUNNING)
            exp.attempts += 1
            exp.save()
        bar = tqdm(total=100, desc=f"tuning experiment {exp.pk}", unit="%", file=sys.stderr, disable=None)
        try:
            # MetaSchedule logs to stdout; keep stdout for the summary (--json: one JSON object)
            reporter = TqdmReporter(exp, bar)
            with contextlib.redirect_stdout(sys.stderr), _signals_stop_at_next_report(reporter):
                result = tuning_experiment_run(exp, reporter)
        except (Exception, KeyboardInterrupt, ExperimentCancelled) as err:
            bar.close()
            exp.refresh_from_db()
            exp.transition_to(State.CANCELLED if isinstance(err, (KeyboardInterrupt, ExperimentCancelled)) else State.FAILED,
                              error=f"{type(err).__name__}: {err}")
            exp.save()
            raise CommandError(f"tuning experiment {exp.pk} {exp.state}: {type(err).__name__}: {err}") from err
        bar.n = 100
        bar.close()
        exp.refresh_from_db()
        exp.transition_to(State.SUCCEEDED)
        exp.result, exp.progress = result, 100
        exp.save()
        summary = {"experiment": exp.pk, **result}
        if opts["json"]:
            self.stdout.write(json.dumps(summary, default=str))
        else:
            def ms(d):
                if d and "median_s" in d:
                    return f"{d['median_s'] * 1e3:.2f} ms (p25 {d['p25_s'] * 1e3:.2f}, p75 {d['p75_s'] * 1e3:.2f})"
                return f"failed: {d['error'][:200]}" if d and d.get("error") else "n/a"

            ort_x = result.get("speedup_vs_onnxruntime")
            self.stdout.write(
                f"experiment {exp.pk}: {result['model']} on {result['host_cpu']} x {result['num_threads']} threads, "
                f"{result['trials_in_database']} trials in {result['tuning_wall_seconds']:.0f} s, "
                f"{result['tuning_joules']:.0f} J ({result['energy_source']})\n"
                f"  tuned   {ms(result['tuned'])}\n  untuned {ms(result['untuned'])}"
                + (f"; without mcpu {ms(result['untuned_no_mcpu'])}" if result.get("untuned_no_mcpu") else "")
                + f"\n  eager   {ms(result.get('eager'))}\n"
                f"  onnxruntime {ms(result.get('onnxruntime'))}"
                + (f" (onnxruntime / tuned {ort_x:.2f}x)" if ort_x else "") + "\n"
                f"  time split: search {result['search_seconds']:.0f} s, build {result['build_seconds']:.0f} s, "
                f"measure {result['measure_seconds']:.0f} s")
            b = result.get("budget") or {}
            if b:
                self.stdout.write(
                    f"  tasks tuned {len(b['tasks_tuned'])}, untuned {len(b['tasks_untuned'])} "
                    f"(untuned share of weighted FLOPs {b['untuned_flop_share']:.0%})"
                    + (f"\n  warning: {b['warning']}" if b.get("warning") else ""))
