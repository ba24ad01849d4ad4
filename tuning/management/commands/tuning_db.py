"""``manage.py tuning_db``: import and export MetaSchedule JSON databases.

    manage.py tuning_db import data/tvm-metaschedule-db/web-llm --name web-llm [--json]
    manage.py tuning_db export --experiment 12 OUT_DIR [--json]
    manage.py tuning_db list [--json]

Import refuses (exit code 1, the reason on stderr, nothing written) AutoTVM and Ansor logs, empty
or damaged databases and files that are not MetaSchedule's; see ``tuning.backends.database``.
An imported database can seed a tuning (``tune --seed-database NAME``); its records must have
been measured under the same target (or ``--force``).
"""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from webapp.models import Experiment


class Command(BaseCommand):
    help = "Import, export or list MetaSchedule JSON tuning databases."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        imp = sub.add_parser("import")
        imp.add_argument("src", help="directory with database_workload.json and database_tuning_record.json")
        imp.add_argument("--name", required=True)
        imp.add_argument("--overwrite", action="store_true")
        imp.add_argument("--json", action="store_true")
        exp = sub.add_parser("export")
        exp.add_argument("dest")
        exp.add_argument("--experiment", type=int, required=True)
        exp.add_argument("--json", action="store_true")
        ls = sub.add_parser("list")
        ls.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        from tuning.backends.database import DatabaseImportError, inspect_database
        from tuning.services import tuning_database_export, tuning_database_import, tuning_root

        try:
            with tqdm(total=1, desc=f"tuning_db {opts['action']}", disable=None) as bar:
                if opts["action"] == "import":
                    out = {"name": opts["name"], **tuning_database_import(src=opts["src"], name=opts["name"], overwrite=opts["overwrite"])}
                elif opts["action"] == "export":
                    try:
                        e = Experiment.objects.get(pk=opts["experiment"], kind="tuning")
                    except Experiment.DoesNotExist:
                        raise CommandError(f"no tuning experiment {opts['experiment']}") from None
                    out = {"dest": opts["dest"], **tuning_database_export(experiment=e, dest=opts["dest"])}
                else:
                    root = tuning_root() / "databases"
                    out = {"databases": {p.name: inspect_database(p) for p in sorted(root.glob("*")) if p.is_dir() and not p.name.startswith(".")}}
                bar.update(1)
        except DatabaseImportError as err:
            raise CommandError(str(err)) from err
        if opts["json"]:
            self.stdout.write(json.dumps(out, default=str))
        elif opts["action"] == "list":
            if not out["databases"]:
                self.stdout.write(f"no tuning databases in {tuning_root() / 'databases'} "
                                  "(import one with: manage.py tuning_db import <folder> --name <name>)")
            for name, s in out["databases"].items():
                self.stdout.write(f"{name}: {s['workloads']} workloads, {s['records']} records, targets {[t['kind'] for t in s['targets']]}")
        else:
            self.stdout.write(f"{opts['action']}: {out['workloads']} workloads, {out['records']} records, "
                              f"targets {[t['kind'] for t in out['targets']]}, decodable by this TVM: {out['decodable']}"
                              + (f" ({out['legacy_workloads']} workloads in a pre-0.27 TVM graph format)" if out["legacy_workloads"] else ""))
