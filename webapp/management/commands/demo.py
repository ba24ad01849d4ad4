"""``manage.py demo``: migrate, create the demo operator, import a real cluster from ``data/``,
run every registered demo step, print each engine's headline against its baseline, then serve
the dashboard and a Celery worker until Ctrl-C (``manage.py serve`` starts them again later)."""
from __future__ import annotations

import json
import logging
import os
import secrets
import time
import traceback

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from webapp.demo import demo_steps
from webapp.management.commands.serve import check_addr, parse_addr, serve
from webapp.plug import Cancelled
from webapp.importers import parse_node_file
from webapp.models import Cluster
from webapp.services import nodes_import

#: Real clusters the demo imports: (cluster name, kind, files relative to settings.DATA_DIR).
DEMO_CLUSTERS = [
    ("alibaba-pai-2020", Cluster.Kind.PAI, ["alibaba-pai-gpu-2020/pai_machine_spec.csv"]),
    ("hkust-sim-example", Cluster.Kind.KUBERNETES, [
        "k8s-scheduler-sim-examples/hkust-adsl/example/test-cluster/node/pai-node-00.yaml",
        "k8s-scheduler-sim-examples/hkust-adsl/example/test-cluster/node/pai-node-01.yaml",
    ]),
]


class Command(BaseCommand):
    help = "Set up and run the Tandem demo (dashboard at http://127.0.0.1:8000)."

    def add_arguments(self, parser):
        parser.add_argument("--no-serve", action="store_true",
                            help="set up and run the demo steps, then exit (`make serve` starts the server later)")
        parser.add_argument("--quick", action="store_true",
                            help="the same as the default: every step is already its engine's smallest real run "
                                 "(about 100 s of steps on a quiet 2-core machine); kept so older scripts work")
        parser.add_argument("--addr", default="127.0.0.1:8000", help="host:port the web server listens on (default %(default)s)")
        parser.add_argument("--username", default="operator", help="the demo operator's user name (default %(default)s)")
        parser.add_argument("--password", default=os.environ.get("TANDEM_DEMO_PASSWORD", ""),
                            help="demo password (default: $TANDEM_DEMO_PASSWORD, else a fresh random one)")
        parser.add_argument("--json", action="store_true", help="print a JSON summary line at the end")

    def handle(self, *args, **opts):
        out = self.stdout
        quiet_libraries()
        # a bad (or, when serving, busy) address is refused before minutes of demo steps; with
        # --no-serve it is only printed, but a wrong one is still a mistake worth naming
        if opts["no_serve"]:
            parse_addr(opts["addr"])
        else:
            check_addr(opts["addr"])
        started = time.monotonic()
        call_command("migrate", interactive=False, verbosity=0)
        out.write("database migrated")

        password = opts["password"] or secrets.token_urlsafe(9)
        User = get_user_model()
        user, _ = User.objects.get_or_create(username=opts["username"], defaults={"email": "operator@example.org"})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()

        clusters = {}
        for name, kind, files in DEMO_CLUSTERS:
            specs = []
            for f in files:
                specs += parse_node_file(settings.DATA_DIR / f)[1]
            with tqdm(total=len(specs), desc=f"import {name}", unit="node", disable=opts["json"]) as bar:
                clusters[name] = nodes_import(cluster_name=name, cluster_kind=kind, specs=specs, progress=bar.update)
            out.write(f"cluster {name}: {len(specs)} nodes, {clusters[name]['gpus']} GPUs (from data/{files[0].split('/')[0]})")

        failed, step_seconds = [], {}
        from django.utils import timezone

        demo_start = timezone.now()
        steps = demo_steps()
        for n, step in enumerate(steps, 1):  # numbered by position (``order`` is only a sort key)
            out.write(self.style.MIGRATE_HEADING(f"demo step {n}/{len(steps)} {step.name}"))
            t0 = time.monotonic()
            try:
                step.run(owner=user, stdout=out)
            except KeyboardInterrupt:
                raise CommandError(f"demo stopped by Ctrl-C during step {step.name}; what ran is kept "
                                   "(`make demo` runs every step again)") from None
            except Exception as err:  # noqa: BLE001 - one engine's failure must not hide the others
                if stopped_by_signal(err):  # Ctrl-C / SIGTERM turned into a cancel (manage.py tune)
                    raise CommandError(f"demo stopped during step {step.name}: {stopped_by_signal(err)}; what ran "
                                       "is kept (`make demo` runs every step again)") from None
                failed.append(step.name)
                out.write(self.style.ERROR(f"demo step {step.name} failed:\n{traceback.format_exc()}"))
            step_seconds[step.name] = round(time.monotonic() - t0, 1)
        out.write(summary_table(user=user, since=demo_start, step_seconds=step_seconds,
                                total_s=time.monotonic() - started))

        host = opts["addr"]
        out.write(self.style.SUCCESS(
            f"\nLog in at http://{host}/accounts/login/ as user {opts['username']!r} with password {password!r}"
            f"\n(the admin is at http://{host}/admin/, the API docs at http://{host}/api/docs/)"
        ))
        if opts["json"]:
            out.write(json.dumps({"username": opts["username"], "clusters": clusters,
                                  "steps": [s.name for s in demo_steps()], "failed_steps": failed,
                                  "step_seconds": step_seconds, "total_s": round(time.monotonic() - started, 1)}))
        if opts["no_serve"]:
            if failed:
                raise CommandError(f"demo steps failed: {', '.join(failed)}")
            return
        serve(host, stdout=out, style=self.style)


def stopped_by_signal(err: BaseException) -> str:
    """The message of a :class:`webapp.plug.Cancelled` in ``err``'s cause/context chain that a
    signal raised (``"... stopped by SIGINT"``), else ``""``: a step the operator stopped ends the
    demo, whereas a step that failed on its own leaves the others to run."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, Cancelled) and " by SIG" in str(err):
            return str(err)
        if isinstance(err, KeyboardInterrupt):
            return "Ctrl-C"
        err = err.__cause__ or err.__context__
    return ""


def quiet_libraries() -> None:
    """No DEBUG chatter from the libraries the engines use (XGBoost, matplotlib, numba, urllib3,
    PIL, filelock) in the demo's terminal; Tandem's own INFO lines stay."""
    for name in ("xgboost", "matplotlib", "numba", "urllib3", "PIL", "filelock", "h5py", "asyncio", "tvm"):
        logging.getLogger(name).setLevel(logging.WARNING)


def summary_table(*, user, since, step_seconds: dict[str, float], total_s: float) -> str:
    """The demo's closing table: each engine's headline (its latest experiment run since
    ``since``) against its baseline, and each step's wall time in seconds."""
    from webapp.selectors import engine_headlines

    rows = [h for h in engine_headlines(user=user) if h.experiment.created_at >= since]
    lines = ["", "Summary (each engine's headline against its baseline; the verdict reads the ratio, ours / baseline,"
             " in the direction named)"]
    cells = []
    for h in rows:
        if h.headline is None:
            cells.append((h.kind, h.error or "no headline figure", "", "", "", ""))
            continue
        x = h.headline
        cells.append((x.engine, x.metric, x.ours, f"{x.baseline_name} {x.baseline}",
                      f"{x.ratio:.3f}" if x.ratio is not None else "", f"{x.verdict} (ratio: {x.better} is better)"))
    titles = ("engine", "figure", "ours", "baseline", "ratio", "verdict")
    # columns as wide as their widest cell (no label cut short), a figure or baseline at most 60
    widths = [min(60, max([len(t)] + [len(c[i]) for c in cells])) for i, t in enumerate(titles)]

    def line(c: tuple[str, ...]) -> str:
        out = [f"{c[0]:{widths[0]}s}", f"{c[1][:widths[1]]:{widths[1]}s}", f"{c[2]:>{widths[2]}s}",
               f"{c[3][:widths[3]]:{widths[3]}s}", f"{c[4]:>{widths[4]}s}", c[5]]
        return "  ".join(out).rstrip()

    head = line(titles)
    lines += [head, "-" * len(head)]
    lines += [line(c) for c in cells]
    if not rows:
        lines.append("(no experiment succeeded)")
    lines.append("step wall times: " + ", ".join(f"{k} {v:.0f} s" for k, v in step_seconds.items())
                 + f"; demo total {total_s:.0f} s")
    return "\n".join(lines)
