"""`make demo`'s environment resolves from PyPI alone: no local wheel folder, no PyTorch index.

Each test runs the pinned uv against PyPI (https://pypi.org/simple) with this machine's package sources
removed: `--no-config` (no uv.toml, no [tool.uv] settings) and no PIP_* or UV_* variables (uv reads no
pip configuration files). The resolutions are real ones, against PyPI's current pages (uv's cache
only spares the downloads of pages that have not changed), and deterministic: every version is pinned.
The full lock's, which holds PyTorch's CPU build, fails the same way, which shows the check can fail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DEMO_LOCK = ROOT / "requirements" / "demo.txt"
LOCK = ROOT / "requirements" / "lock.txt"
PYPI = "https://pypi.org/simple"
# The interpreter and platform the locks are resolved for (scripts/venv.sh LOCK_PYTHON, LOCK_PLATFORM).
TARGET = ["--python-version", "3.11", "--python-platform", "x86_64-unknown-linux-gnu"]
# PyTorch and what its CUDA builds bring; none of them belongs in the demo.
PYTORCH = re.compile(r"^(torch|torchvision|torchaudio|triton|nvidia-.*)$")

pytestmark = pytest.mark.timeout(120)


@cache
def uv() -> str:
    return subprocess.run(
        [str(ROOT / "scripts" / "venv.sh"), "uv"], check=True, capture_output=True, text=True
    ).stdout.strip()


def pypi_only(*args: str) -> subprocess.CompletedProcess[str]:
    """`uv ARGS` with PyPI as the only index and none of the machine's package sources."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV"))}
    return subprocess.run(
        [uv(), *args, "--no-config", "--default-index", PYPI],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
    )


def pins(text: str) -> dict[str, str]:
    """name -> version of the `name==version` lines of a requirements text."""
    found = {}
    for line in text.splitlines():
        if match := re.match(r"^([A-Za-z0-9._-]+)==([^\s;]+)", line):
            found[canonicalize_name(match[1])] = match[2]
    return found


@pytest.fixture(scope="module")
def empty_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("demo-env") / "venv"
    command = [uv(), "venv", "--quiet", "--no-config", "--python", sys.executable, str(venv)]
    subprocess.run(command, check=True)
    return venv / "bin" / "python"


def test_the_demo_lock_compiles_from_pypi_alone_to_the_same_pins() -> None:
    # What `make lock` runs for requirements/demo.txt (scripts/venv.sh), here with PyPI alone.
    proc = pypi_only(
        "pip", "compile", "pyproject.toml", "requirements/demo.in", "--constraint", "requirements/lock.txt",
        *TARGET, "--no-header", "--no-annotate", "--quiet",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    resolved = pins(proc.stdout)
    assert resolved == pins(DEMO_LOCK.read_text()), "requirements/demo.txt is stale: run `make lock`"
    assert {"apache-airflow", "tensorflow-cpu", "scikit-learn", "tensorboard"} <= resolved.keys()
    assert not [name for name in resolved if PYTORCH.match(name)]


def test_make_demos_install_finds_every_pinned_wheel_on_pypi(empty_venv: Path) -> None:
    # `make demo`'s `uv pip sync` (scripts/venv.sh install-demo) as a dry run into an empty venv: a wheel
    # of each pinned version for this interpreter and platform, on PyPI.
    proc = pypi_only("pip", "sync", "--dry-run", "--python", str(empty_venv), str(DEMO_LOCK))
    assert proc.returncode == 0, proc.stderr
    planned = pins(proc.stderr.replace(" + ", "\n"))  # uv lists the plan as " + name==version" lines
    assert planned == pins(DEMO_LOCK.read_text())
    assert f"Would install {len(planned)} packages" in proc.stderr
    assert not [name for name in planned if PYTORCH.match(name)]


def test_the_full_lock_does_not_resolve_from_pypi_alone(empty_venv: Path) -> None:
    # The same resolution of the test environment's lock fails on PyTorch's CPU build, which PyPI does not
    # serve: it needs PyTorch's CPU index or a local wheel folder (tests/unit/test_venv_script.py).
    torch = pins(LOCK.read_text())["torch"]
    assert torch.endswith("+cpu"), torch
    proc = pypi_only("pip", "sync", "--dry-run", "--python", str(empty_venv), str(LOCK))
    assert proc.returncode != 0
    assert f"there is no version of torch=={torch}" in proc.stderr, proc.stderr
