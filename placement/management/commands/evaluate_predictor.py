"""``manage.py evaluate_predictor``: leave-one-model-out RMSLE and MAE of the utilisation
predictor for every GPU type with profile rows (shipped Gavel-derived rows + database rows)."""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand
from tqdm import tqdm


class Command(BaseCommand):
    help = ("Leave-one-model-out evaluation of the XGBoost utilisation predictor per GPU type "
            "(--pairs: of the pair interference predictor)")

    def add_arguments(self, parser):
        parser.add_argument("--target", default="util_mean_pct", choices=["util_mean_pct", "util_peak_pct", "memory_mib"])
        parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
        parser.add_argument("--pairs", action="store_true",
                            help="evaluate the pair interference predictor (leave-one-model-out on Gavel's "
                                 "measured pairs, beside the constant-slowdown baseline) instead")

    def handle(self, *args, **o):
        if o["pairs"]:
            return self._pairs(o)
        from dataclasses import asdict

        from placement.backends.predictor import NoProfileData, UtilisationPredictor
        from placement.services import _tables, profile_rows_all
        from webapp.management.migrated import require_migrated

        require_migrated()  # profile rows from the database join the shipped ones

        rows = profile_rows_all()
        pred = UtilisationPredictor(rows, _tables()[1])
        out = []
        for gpu in tqdm(sorted({r["gpu_type"].upper() for r in rows}), desc="evaluate", disable=o["json"]):
            try:
                res = pred.leave_one_model_out(gpu_type=gpu, target=o["target"])
                res["live_config"] = asdict(pred.config(gpu_type=gpu, target=o["target"]))
                out.append(res)
            except NoProfileData as err:
                out.append({"gpu_type": gpu, "target": o["target"], "error": str(err)})
        if o["json"]:
            self.stdout.write(json.dumps(out))
        else:
            self.stdout.write("constant = median of each fold's training rows; configuration (max_depth, "
                              "min_child_weight, shrink) chosen per fold by an inner leave-one-model-out "
                              "over its training models only (nested)")
            for r in out:
                self.stdout.write(f"{r['gpu_type']}: " + (r.get("error") or
                                  f"RMSLE {r['rmsle']:.3f} (constant {r['const_rmsle']:.3f}, paper "
                                  f"{r['paper_rmsle']}), MAE {r['mae']:.2f} (constant {r['const_mae']:.2f}), "
                                  f"Spearman {r['spearman']:.3f} over {r['rows']} rows / {r['models']} models"))
                if "folds" in r:
                    self.stdout.write("  folds: " + "; ".join(
                        f"{m} {f['max_depth']}/{f['min_child_weight']}/{f['shrink']:g}" for m, f in r["folds"].items()))
                    c = r["live_config"]
                    self.stdout.write(f"  live predictor (same selection on all rows): "
                                      f"{c['max_depth']}/{c['min_child_weight']}/{c['shrink']:g}")

    def _pairs(self, o):
        import csv
        from pathlib import Path

        from django.conf import settings

        from placement.core import pair_predictor as pp
        from placement.core.traces import load_throughputs

        data = Path(settings.DATA_DIR)
        with open(data / "placement" / "zoo_features.csv", newline="") as fh:
            feat = pp.features_by_type(csv.DictReader(fh))
        tables = load_throughputs(data / "gavel-traces" / "simulation_throughputs.json")
        pairs = pp.measured_pairs(tables)
        res = pp.leave_one_model_out(pairs, feat, isolated=pp.isolated_throughputs(tables))
        if o["json"]:
            self.stdout.write(json.dumps(res))
            return
        self.stdout.write(f"{res['n']} held-out pair predictions over {len(res['folds'])} families "
                          f"(leave-one-model-out)\npredictor: MAE {res['mae']:.3f}, Spearman {res['spearman']:.3f}\n"
                          f"constant (median training slowdown): MAE {res['const_mae']:.3f}, Spearman n/a")
        for f, r in res["folds"].items():
            self.stdout.write(f"  {f}: {r['n']} pairs, MAE {r['mae']:.3f} (constant {r['const_mae']:.3f}), "
                              f"Spearman {r['spearman']:.3f}, lam_side {r['lam_side']:g} (nested)")
