"""The digits programs by hand, without a cluster: output format, exported model, exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.tensorflow, pytest.mark.timeout(180)]

TRAINING = Path(__file__).resolve().parents[2] / "example_dags" / "training"
KATIB = re.compile(r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)")


def _run(program: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return subprocess.run(
        [sys.executable, str(TRAINING / program), *args], env=env, capture_output=True, text=True, timeout=170
    )


@pytest.mark.parametrize("program", ["digits_mwms.py", "digits_ps.py"])
def test_single_process_run_prints_katib_metrics_and_exports(program: str, tmp_path: Path) -> None:
    done = _run(
        program,
        "--epochs=3",
        "--learning_rate=0.01",
        f"--model_dir={tmp_path / 'm'}",
        f"--log_dir={tmp_path / 'l'}",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    epochs = [line for line in done.stdout.splitlines() if line.startswith("epoch=")]
    assert [int(KATIB.findall(line)[0][1]) for line in epochs] == [1, 2, 3]
    for line in epochs:
        names = [m[0] for m in KATIB.findall(line)]
        assert names == ["epoch", "loss", "accuracy"]
    (final,) = [line for line in done.stdout.splitlines() if line.startswith("test_accuracy=")]
    accuracy = float(final.split("=", 1)[1])
    assert 0.8 < accuracy <= 1.0
    saved = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert saved["epoch"] == 3 and saved["test_accuracy"] == pytest.approx(accuracy, abs=1e-4)
    assert (tmp_path / "m" / "model.keras").stat().st_size > 0
    assert any((tmp_path / "l").glob("events.out.tfevents.*"))


def test_bad_arguments_exit_non_zero() -> None:
    done = _run("digits_mwms.py", "--epochs=many")
    assert done.returncode != 0
    assert "--epochs" in done.stderr
