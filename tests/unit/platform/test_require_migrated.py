"""Commands that read the database refuse an unmigrated one with the command to run."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("argv", [["evaluate_predictor"], ["tune", "--model", "convnet", "--trials", "1"]])
def test_unmigrated_embedded_database_is_named_not_a_traceback(tmp_path, argv):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env["TANDEM_VAR_DIR"] = str(tmp_path)
    p = subprocess.run([sys.executable, "manage.py", *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 1, p.stderr
    assert f"the database {tmp_path / 'tandem.sqlite3'} is not migrated" in p.stderr
    assert "run `python manage.py migrate` first" in p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "tuning").exists()  # nothing of the tuning was started
