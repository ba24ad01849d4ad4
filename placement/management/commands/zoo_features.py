"""``manage.py zoo_features``: regenerate the model-zoo feature table and the Gavel-derived
profile table shipped in ``data/placement/`` (zoo_features.csv, gavel_profile.csv)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand
from tqdm import tqdm

ZOO_BATCHES = (16, 32, 64)
TRANSFORMER_BATCHES = (8, 16)
ONNX_BATCHES = (1, 16)


class Command(BaseCommand):
    help = "Trace every zoo model (torchvision, transformers, Gavel workloads, ONNX) and write data/placement/*.csv"

    def add_arguments(self, parser):
        parser.add_argument("--out", default=str(Path(settings.DATA_DIR) / "placement"))
        parser.add_argument("--json", action="store_true", help="print a JSON summary")

    def handle(self, *args, **opts):
        from placement.backends.features import GAVEL_FAMILIES, TORCHVISION_ZOO, TRANSFORMERS_ZOO, model_features
        from placement.core.profiles import derive_gavel_rows
        from placement.core.traces import load_throughputs, parse_gavel_job_type

        data = Path(settings.DATA_DIR)
        thr = load_throughputs(data / "gavel-traces" / "simulation_throughputs.json")
        gavel_types = sorted({parse_gavel_job_type(k[2:].rsplit("'", 1)[0]) for k in thr["v100"]})
        todo = [(m, b) for m in TORCHVISION_ZOO for b in ZOO_BATCHES]
        todo += [(m, b) for m in TRANSFORMERS_ZOO for b in TRANSFORMER_BATCHES]
        todo += [(f"onnx:{p.relative_to(settings.BASE_DIR)}", b)
                 for p in sorted((data / "onnx-light-models").glob("*.onnx")) for b in ONNX_BATCHES]
        todo += [(f"gavel:{fam}", bs) for fam, bs in gavel_types if fam in GAVEL_FAMILIES]
        rows = []
        for name, bs in tqdm(todo, desc="zoo features", disable=opts["json"]):
            rows.append(model_features(name, bs).as_dict())
        out = Path(opts["out"])
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "zoo_features.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        flops = {(r["model"].removeprefix("gavel:"), r["batch_size"]): r["train_flops"]
                 for r in rows if r["source"] == "gavel-workload"}
        prof = derive_gavel_rows(thr, flops)
        with open(out / "gavel_profile.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(prof[0]))
            w.writeheader()
            w.writerows(prof)
        summary = {"feature_rows": len(rows), "models": len({r["model"] for r in rows}),
                   "profile_rows": len(prof), "out": str(out)}
        self.stdout.write(json.dumps(summary) if opts["json"] else f"wrote {summary}")
