"""``manage.py import_nodes FILE... --cluster NAME``: import nodes from Kubernetes ``v1/Node``
YAML or the PAI machine-spec CSV, all files in one transaction (a bad file imports nothing).
Capacities over the limits of :func:`webapp.importers.check_capacity` are errors; a GPU type of
unknown memory is imported with 0 MiB and reported as a warning (stderr, and ``warnings`` in
the ``--json`` summary)."""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from webapp.importers import NodeImportError, parse_node_file, unknown_gpu_warnings
from webapp.models import Cluster
from webapp.services import nodes_import


class Command(BaseCommand):
    help = "Import nodes (and their GPUs) from Kubernetes Node YAML or the PAI machine-spec CSV into a cluster."

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", help=".yaml/.yml (Kubernetes v1 Node or List) or .csv (PAI machine spec)")
        parser.add_argument("--cluster", required=True, help="cluster name (created if missing)")
        parser.add_argument("--format", choices=["auto", "k8s", "pai"], default="auto")
        parser.add_argument("--region", default="", help="region of a newly created cluster")
        parser.add_argument("--json", action="store_true", help="print a JSON summary instead of text")

    def handle(self, *args, **opts):
        specs, fmts = [], set()
        for f in opts["files"]:
            try:
                fmt, got = parse_node_file(f, fmt=opts["format"])
            except NodeImportError as err:
                raise CommandError(f"nothing imported: {err}") from None
            specs += got
            fmts.add(fmt)
        names = [s.name for s in specs]
        dup = {n for n in names if names.count(n) > 1} if len(names) != len(set(names)) else set()
        if dup:
            raise CommandError(f"nothing imported: node(s) given in more than one file: {', '.join(sorted(dup)[:5])}")
        warnings = unknown_gpu_warnings(specs)
        kind = Cluster.Kind.PAI if fmts == {"pai"} else Cluster.Kind.KUBERNETES
        with tqdm(total=len(specs), desc="import nodes", unit="node", disable=opts["json"] or opts["verbosity"] == 0) as bar:
            summary = nodes_import(cluster_name=opts["cluster"], cluster_kind=kind, specs=specs, progress=bar.update)
        if opts["region"]:
            Cluster.objects.filter(name=opts["cluster"], region="").update(region=opts["region"])
        summary = {"cluster": opts["cluster"], "files": len(opts["files"]), **summary, "warnings": warnings}
        if opts["json"]:
            self.stdout.write(json.dumps(summary))
        else:
            self.stdout.write(
                f"cluster {summary['cluster']}: {summary['nodes_created']} nodes created, "
                f"{summary['nodes_updated']} updated, {summary['gpus']} GPUs"
            )
            for w in warnings:
                self.stderr.write(f"warning: {w}")
