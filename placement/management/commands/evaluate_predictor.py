"""``manage.py evaluate_predictor``: leave-one-model-out RMSLE and MAE of the utilisation
predictor for every GPU type with profile rows (shipped Gavel-derived rows + database rows)."""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand
from tqdm import tqdm


class Command(BaseCommand):
    help = "Leave-one-model-out evaluation of the XGBoost utilisation predictor per GPU type"

    def add_arguments(self, parser):
        parser.add_argument("--target", default="util_mean_pct", choices=["util_mean_pct", "util_peak_pct", "memory_mib"])
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **o):
        from placement.backends.predictor import NoProfileData, UtilisationPredictor
        from placement.services import _tables, profile_rows_all

        rows = profile_rows_all()
        pred = UtilisationPredictor(rows, _tables()[1])
        out = []
        for gpu in tqdm(sorted({r["gpu_type"].upper() for r in rows}), desc="evaluate", disable=o["json"]):
            try:
                out.append(pred.leave_one_model_out(gpu_type=gpu, target=o["target"]))
            except NoProfileData as err:
                out.append({"gpu_type": gpu, "target": o["target"], "error": str(err)})
        if o["json"]:
            self.stdout.write(json.dumps(out))
        else:
            for r in out:
                self.stdout.write(f"{r['gpu_type']}: " + (r.get("error") or
                                  f"RMSLE {r['rmsle']:.3f}, MAE {r['mae']:.2f} pp over {r['rows']} rows / {r['models']} models"))
