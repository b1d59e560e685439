"""What users install: the wheel, built from the checkout as a release would be, and plain pip.

The development environment installs from the lock with uv (scripts/venv.sh); users run
``pip install airflow-provider-tfjob``, which takes the wheel and resolves its declared requirements
with pip. These tests build that wheel (pip, with build isolation: the declared build backend, not
the venv's), read what it carries, have a fresh pip resolve it, and run the installed copy away from
the checkout: its package data, its console script, its Airflow entry points and a local cluster.
"""

from __future__ import annotations

import email
import json
import os
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = [pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def run(*argv: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=480, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, (
        f"{argv} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # -W error: a deprecation the build backend announces (with a date it stops building) fails here first.
    build = run(sys.executable, "-W", "error::DeprecationWarning", "-m", "pip", "wheel", "--no-deps",
                "--disable-pip-version-check", "-w", out, ROOT)  # fmt: skip
    assert "deprecated" not in build.stdout + build.stderr, build.stdout + build.stderr
    (built,) = out.glob("airflow_provider_tfjob-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The wheel installed on its own into a target directory; an environment in which Python imports
    the provider from there (its requirements from the test venv), run from outside the checkout."""
    target = tmp_path_factory.mktemp("site")
    run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
        "--target", target, wheel)  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env["PYTHONPATH"] = str(target)
    yield env


def in_installed(env: dict[str, str], code: str, cwd: Path) -> str:
    return run(sys.executable, "-c", code, env=env, cwd=cwd).stdout


def test_the_wheel_carries_every_file_of_the_package(wheel: Path) -> None:
    tracked = run("git", "ls-files", "airflow_tfjob", cwd=ROOT).stdout.split()
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
    missing = [name for name in tracked if name not in names]
    assert not missing, f"files of the package the wheel leaves out (pyproject's package-data): {missing}"


def test_the_wheel_declares_the_projects_requirements_and_entry_points(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as whl:
        info = next(n.split("/")[0] for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.message_from_bytes(whl.read(f"{info}/METADATA"))
        entry_points = whl.read(f"{info}/entry_points.txt").decode()
    declared = sorted(str(Requirement(r)) for r in PROJECT["dependencies"])
    plain = sorted(str(r) for r in map(Requirement, metadata.get_all("Requires-Dist") or []) if not r.marker)
    assert plain == declared
    # Ranges, not the lock's pins: a user's pip must be free to resolve with what they already have.
    assert not [r for r in declared if "==" in r]
    assert metadata["License-Expression"] == "Apache-2.0"
    for line in ("tfjob-local = airflow_tfjob.local.cli:main", "tfjob-runtimes = airflow_tfjob.trainjob.runtimes:main",
                 "airflow_tfjob = airflow_tfjob.plugin:TFJobPlugin",
                 "provider_info = airflow_tfjob:get_provider_info"):  # fmt: skip
        assert line in entry_points


def test_plain_pip_resolves_the_wheel_in_a_fresh_environment(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    report = tmp_path / "report.json"
    run(env_dir / "bin" / "python", "-m", "pip", "install", "--dry-run", "--quiet", "--disable-pip-version-check",
        "--report", report, wheel)  # fmt: skip
    chosen = {
        canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }
    assert chosen["airflow-provider-tfjob"] == PROJECT["version"]
    for raw in PROJECT["dependencies"]:
        requirement = Requirement(raw)
        name = canonicalize_name(requirement.name)
        assert name in chosen and requirement.specifier.contains(chosen[name], prereleases=True), (
            raw,
            chosen.get(name),
        )


def test_the_installed_copy_runs_away_from_the_checkout(installed: dict[str, str], tmp_path: Path) -> None:
    target = installed["PYTHONPATH"]
    code = f"""
import airflow_tfjob, json
assert airflow_tfjob.__file__.startswith({target!r}), airflow_tfjob.__file__
from importlib import resources
from airflow_tfjob.trainjob.runtimes import load_runtimes
from airflow_tfjob.operators.tfjob import TFJobOperator
role = resources.files("airflow_tfjob").joinpath("rbac/role.yaml").read_text()
print(json.dumps({{"runtimes": [r["metadata"]["name"] for r in load_runtimes(None)],
                   "role": "kind: Role" in role,
                   "provider": airflow_tfjob.get_provider_info()["package-name"]}}))
"""
    found = json.loads(in_installed(installed, code, tmp_path))
    assert found == {
        "runtimes": ["tensorflow-distributed", "tensorflow-chief", "tensorflow-ps"],
        "role": True,
        "provider": "airflow-provider-tfjob",
    }
    shown = run(
        sys.executable, "-m", "airflow_tfjob.trainjob.runtimes", "show", env=installed, cwd=tmp_path
    ).stdout
    assert shown.count("kind: ClusterTrainingRuntime") == 3


def test_a_local_cluster_from_the_installed_copy_runs_a_replica(
    installed: dict[str, str], tmp_path: Path
) -> None:
    # The cluster's own files (the watchdog script it runs by path, its schemas) must come with the wheel.
    code = """
import sys, time
from kubernetes import client, config
from airflow_tfjob.local import LocalCluster
with LocalCluster() as cluster:
    api = client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig_path)))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hello"},
           "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "python",
                    "command": [sys.executable, "-c", "print('hello from the wheel')"]}]}}
    api.create_namespaced_pod("default", pod)
    while api.read_namespaced_pod("hello", "default").status.phase != "Succeeded":
        time.sleep(0.1)
    # Unparsed: the client's parsed log of a text body is the repr of its bytes, whatever the server.
    print(api.read_namespaced_pod_log("hello", "default", _preload_content=False).data.decode(), end="")
"""
    assert in_installed(installed, code, tmp_path) == "hello from the wheel\n"
