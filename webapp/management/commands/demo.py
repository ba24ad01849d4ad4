"""``manage.py demo``: migrate, create the demo operator, import a real cluster from ``data/``,
run every registered demo step, then serve the dashboard and a Celery worker until Ctrl-C."""
from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import traceback

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from webapp.demo import demo_steps
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
        parser.add_argument("--no-serve", action="store_true", help="set up and run the demo steps, then exit")
        parser.add_argument("--addr", default="127.0.0.1:8000", help="where the web server listens")
        parser.add_argument("--username", default="operator")
        parser.add_argument("--password", default=os.environ.get("TANDEM_DEMO_PASSWORD", ""),
                            help="demo password (default: $TANDEM_DEMO_PASSWORD, else a fresh random one)")
        parser.add_argument("--json", action="store_true", help="print a JSON summary line at the end")

    def handle(self, *args, **opts):
        out = self.stdout
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

        failed = []
        for step in demo_steps():
            out.write(self.style.MIGRATE_HEADING(f"demo step {step.order} {step.name}"))
            try:
                step.run(owner=user, stdout=out)
            except Exception:  # noqa: BLE001 - one engine's failure must not hide the others
                failed.append(step.name)
                out.write(self.style.ERROR(f"demo step {step.name} failed:\n{traceback.format_exc()}"))

        host = opts["addr"]
        out.write(self.style.SUCCESS(
            f"\nLog in at http://{host}/accounts/login/ as user {opts['username']!r} with password {password!r}"
            f"\n(the admin is at http://{host}/admin/, the API docs at http://{host}/api/docs/)"
        ))
        if opts["json"]:
            out.write(json.dumps({"username": opts["username"], "clusters": clusters,
                                  "steps": [s.name for s in demo_steps()], "failed_steps": failed}))
        if opts["no_serve"]:
            if failed:
                raise CommandError(f"demo steps failed: {', '.join(failed)}")
            return
        self.serve(host)

    def serve(self, addr: str) -> None:
        """Run the web server and one Celery worker in the foreground; Ctrl-C stops both."""
        env = dict(os.environ)
        env.setdefault("DJANGO_SETTINGS_MODULE", os.environ.get("DJANGO_SETTINGS_MODULE", "webapp.settings.dev"))
        root = str(settings.BASE_DIR)
        procs = [
            subprocess.Popen([sys.executable, "manage.py", "runserver", addr, "--noreload"], cwd=root, env=env),
            subprocess.Popen([sys.executable, "-m", "celery", "-A", "workers", "worker", "-Q", "cpu,gpu", "-c", "1",
                              "-l", "INFO", "--without-mingle", "--without-gossip"], cwd=root, env=env),
        ]
        self.stdout.write(self.style.SUCCESS(f"dashboard: http://{addr}/   (Ctrl-C stops the web server and the worker)"))
        try:
            while all(p.poll() is None for p in procs):
                time.sleep(0.5)
            self.stdout.write(self.style.ERROR("a demo process exited; stopping the other"))
        except KeyboardInterrupt:
            self.stdout.write("stopping web server and worker")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
