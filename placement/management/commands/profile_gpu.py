"""``manage.py profile_gpu``: profile zoo models on this machine's NVIDIA GPU through NVML and
store the rows (ProfileRow, source ``nvml:<GPU name>``), optionally as a CSV too."""
from __future__ import annotations

import csv
import json

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

DEFAULT_MODELS = ("resnet18,resnet34,resnet50,resnet101,vgg11,vgg16,alexnet,mobilenet_v2,mobilenet_v3_large,"
                  "densenet121,squeezenet1_0,shufflenet_v2_x1_0,efficientnet_b0,googlenet,resnext50_32x4d,"
                  "bert-small,gpt2-small")


class Command(BaseCommand):
    help = "Run training steps of zoo models on an NVIDIA GPU, sample NVML, store profile rows"

    def add_arguments(self, parser):
        parser.add_argument("--models", default=DEFAULT_MODELS)
        parser.add_argument("--batch-sizes", default="16,32,64")
        parser.add_argument("--steps", type=int, default=200)
        parser.add_argument("--warmup", type=int, default=20)
        parser.add_argument("--device", type=int, default=0, help="CUDA / NVML device index")
        parser.add_argument("--csv", default="", help="also write the rows to this CSV")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **o):
        from placement.backends.nvml_profiler import profile_model
        from placement.models import ProfileRow

        todo = [(m, int(b)) for m in o["models"].split(",") for b in o["batch_sizes"].split(",")]
        rows, errors = [], []
        for name, bs in tqdm(todo, desc="profile_gpu", disable=o["json"]):
            try:
                row = profile_model(name, bs, steps=o["steps"], warmup=o["warmup"], index=o["device"])
            except RuntimeError as err:
                if "CUDA is not available" in str(err):
                    raise CommandError(str(err)) from None
                errors.append({"model": name, "batch_size": bs, "error": str(err)[:300]})  # e.g. out of memory
                continue
            ProfileRow.objects.update_or_create(
                model=row["model"], batch_size=bs, gpu_type=row["gpu_type"], source=row["source"],
                defaults={k: row[k] for k in ("util_mean_pct", "util_peak_pct", "memory_mib")})
            rows.append(row)
        if o["csv"] and rows:
            with open(o["csv"], "w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
        summary = {"rows": len(rows), "errors": errors, "gpu": rows[0]["source"] if rows else None}
        self.stdout.write(json.dumps(summary) if o["json"] else f"stored {len(rows)} profile rows; {len(errors)} failed")
