"""scripts/venv.sh's choice of where PyTorch's CPU build comes from, and its one line when uv cannot get it.

The lock pins `torch==2.13.0+cpu`, a build PyPI does not serve. The script hands uv a folder named in
pip's find-links when one holds the wheel, else PyTorch's CPU index for the PyTorch packages only
(`--torch-backend cpu`); when uv cannot get the build, it says in one line what to configure. These
tests run the script against a stand-in for uv that records its arguments (no network, no install), with
pip's configuration files left out and its find-links given by PIP_FIND_LINKS.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"

FAKE_UV = """#!/usr/bin/env bash
# A stand-in for uv 0.13.9: records each call's arguments, a line each, and answers as FAKE_UV_SYNC says.
printf '%s\\n' "$*" >>"$FAKE_UV_CALLS"
case "$1 ${2:-}" in
    "--version "*) echo "uv 0.13.9" ;;
    "venv "*) mkdir -p "${@: -1}/bin" && ln -s "$FAKE_UV_PYTHON" "${@: -1}/bin/python" ;;
    "pip sync")
        cp "${@: -1}" "$FAKE_UV_CALLS.requirements"
        case "${FAKE_UV_SYNC:-ok}" in
            dns) printf '%s\\n' \\
                "error: Request failed after 3 retries in 6.9s" \\
                "  cause: Failed to fetch: https://download.pytorch.org/whl/cpu/torch/" \\
                "  cause: dns error" \\
                "  cause: failed to lookup address information: Name or service not known" >&2
                exit 2 ;;
            other) echo "error: Failed to fetch: https://pypi.org/simple/numpy/" >&2; exit 2 ;;
        esac ;;
esac
"""


@dataclass
class Run:
    returncode: int
    stderr: str
    sync: str  # the arguments of `uv pip sync`
    requirements: str  # the requirements file it was given

    def lines(self) -> list[str]:
        """What the script said besides its progress lines (those start with '==>')."""
        return [line for line in self.stderr.splitlines() if not line.startswith("==>")]


def run_script(tmp_path: Path, verb: str, find_links: Path | None = None, sync: str = "ok") -> Run:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "uv").write_text(FAKE_UV)
    (bin_dir / "uv").chmod(0o755)
    calls = tmp_path / "calls"
    calls.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV"))}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PYTHON=sys.executable,  # whose pip reads pip's configuration
        PIP_CONFIG_FILE=os.devnull,  # none of this machine's pip configuration files
        FAKE_UV_CALLS=str(calls),
        FAKE_UV_PYTHON=sys.executable,
        FAKE_UV_SYNC=sync,
    )
    if find_links is not None:
        env["PIP_FIND_LINKS"] = str(find_links)
    venv = tmp_path / f"venv-{verb}"
    proc = subprocess.run(
        [str(ROOT / "scripts" / "venv.sh"), verb, str(venv)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    syncs = [line for line in calls.read_text().splitlines() if line.startswith("pip sync ")]
    assert len(syncs) == 1, calls.read_text()
    requirements = Path(f"{calls}.requirements").read_text()
    return Run(proc.returncode, proc.stderr, syncs[0], requirements)


def wheel_folder(tmp_path: Path, *names: str) -> Path:
    folder = tmp_path / "wheels"
    folder.mkdir()
    for name in names:
        (folder / name).touch()
    return folder


def test_without_a_local_folder_torch_comes_from_pytorchs_cpu_index_only(tmp_path: Path) -> None:
    run = run_script(tmp_path, "install")
    assert run.returncode == 0, run.stderr
    assert "--torch-backend cpu" in run.sync
    assert "--find-links" not in run.sync and "--index " not in run.sync
    assert "torch==2.13.0+cpu\n" in run.requirements
    assert f"torch==2.13.0+cpu from PyTorch's CPU index {TORCH_INDEX}" in run.stderr


def test_a_folder_in_pips_find_links_that_holds_the_wheel_is_used_and_no_index(tmp_path: Path) -> None:
    folder = wheel_folder(tmp_path, WHEEL)
    run = run_script(tmp_path, "install", find_links=folder)
    assert run.returncode == 0, run.stderr
    assert f"--find-links {folder}" in run.sync
    assert "--torch-backend" not in run.sync
    assert f"torch==2.13.0+cpu from pip's find-links ({folder})" in run.stderr


def test_a_folder_without_that_build_leaves_torch_to_the_cpu_index(tmp_path: Path) -> None:
    folder = wheel_folder(tmp_path, WHEEL.replace("2.13.0", "2.12.0"))
    run = run_script(tmp_path, "install", find_links=folder)
    assert run.returncode == 0, run.stderr
    assert f"--find-links {folder}" in run.sync  # still there for the other wheels it may hold
    assert "--torch-backend cpu" in run.sync


def test_torch_out_of_reach_fails_with_one_line_that_says_what_to_configure(tmp_path: Path) -> None:
    run = run_script(tmp_path, "install", sync="dns")
    assert run.returncode != 0
    assert len(run.lines()) == 1, run.stderr
    line = run.lines()[0]
    assert line.startswith("venv.sh: cannot install torch==2.13.0+cpu (uv: failed to lookup address"), line
    assert f"make PyTorch's CPU index {TORCH_INDEX} reachable" in line
    assert "pip config set global.find-links DIR" in line


def test_another_failure_shows_uvs_output(tmp_path: Path) -> None:
    run = run_script(tmp_path, "install", find_links=wheel_folder(tmp_path, WHEEL), sync="other")
    assert run.returncode != 0
    assert run.lines() == [
        "error: Failed to fetch: https://pypi.org/simple/numpy/",
        "venv.sh: uv could not install requirements/lock.txt",
    ]


@pytest.mark.parametrize("find_links", [False, True])
def test_the_demo_env_needs_no_pytorch_index_nor_local_folder(tmp_path: Path, find_links: bool) -> None:
    folder = wheel_folder(tmp_path, WHEEL) if find_links else None
    run = run_script(tmp_path, "install-demo", find_links=folder)
    assert run.returncode == 0, run.stderr
    assert "--torch-backend" not in run.sync
    assert run.requirements == (ROOT / "requirements" / "demo.txt").read_text() + f"-e {ROOT}\n"
    assert "==> uv pip sync requirements/demo.txt into " in run.stderr
