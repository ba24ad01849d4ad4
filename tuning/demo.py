"""``make demo`` step of the tuning engine: tune a small real model on the LLVM target with a
tiny budget (built-in ``convnet``: two 3x3 convolutions, 2 tasks, 16 trials; a few minutes on
2 cores) and print where its curve is."""
from __future__ import annotations

from django.core.management import call_command


def run_tuning_demo(*, owner, stdout) -> None:
    stdout.write("tuning: MetaSchedule on LLVM, convnet (2 tasks), 16 trials ...\n")
    call_command("tune", model="convnet", target="llvm", trials=16, trials_per_round=8, repeats=10,
                 owner=owner.username, stdout=stdout)
    stdout.write("tuning: curve and tuned/untuned/PyTorch comparison at /tuning/\n")
