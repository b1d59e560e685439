"""What users install: the wheel and the sdist, built from the checkout as a release would be, and plain pip.

The development environment installs from the lock with uv (scripts/venv.sh); users follow the README:
pip installs Airflow with its constraints file, then the provider's wheel beside it. These tests build
the sdist and, from it, the wheel (one `uv build` with the project's pinned uv, with build isolation: the
declared build backend, not the venv's), check both as a package index would (`twine check --strict`: the
README is the long description), read what they carry, have plain pip resolve the wheel as in a fresh
environment, run the installed copy away from the checkout (its package data, its console script, its
Airflow entry points and a local cluster), and run the README's install commands and its DAG,
render-only, in a fresh venv.

Environments are made with the pinned uv, which installs from its cache in a second where stdlib venv
and pip took minutes on a busy machine; pip runs where the claim is pip's: its resolution of the wheel,
and the README's provider command, which is a pip command.
"""

from __future__ import annotations

import ast
import email
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
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
README = (ROOT / "README.md").read_text()
# The Airflow release the project is tested with (requirements/lock.in), the one the README installs.
AIRFLOW = next(
    line.partition("==")[2].strip()
    for line in (ROOT / "requirements" / "lock.in").read_text().splitlines()
    if line.startswith("apache-airflow==")
)


def run(*argv: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=480, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, (
        f"{argv} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


@pytest.fixture(scope="module")
def uv() -> str:
    """The project's pinned uv (scripts/venv.sh installs it once into the user's cache)."""
    return run(ROOT / "scripts" / "venv.sh", "uv").stdout.strip()


@pytest.fixture(scope="module")
def artifacts(uv: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist, and the wheel built from it, as a release builds them: one `uv build` of the checkout,
    each in an isolated environment with the declared build backend (the newest it allows)."""
    out = tmp_path_factory.mktemp("dist")
    build = run(uv, "build", "--python", sys.executable, "--out-dir", out, ROOT)
    # uv shows the backend's output: a deprecation it announces (with a date it stops building) fails here
    # first.
    assert "deprecated" not in build.stdout + build.stderr, build.stdout + build.stderr
    (sdist,) = out.glob("airflow_provider_tfjob-*.tar.gz")
    (wheel,) = out.glob("airflow_provider_tfjob-*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def wheel(artifacts: tuple[Path, Path]) -> Path:
    return artifacts[1]


@pytest.fixture(scope="module")
def sdist(artifacts: tuple[Path, Path]) -> Path:
    return artifacts[0]


@pytest.fixture(scope="module")
def installed(wheel: Path, uv: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The wheel installed on its own into a target directory; an environment in which Python imports
    the provider from there (its requirements from the test venv), run from outside the checkout."""
    target = tmp_path_factory.mktemp("site")
    run(uv, "pip", "install", "--quiet", "--no-deps", "--offline", "--python", sys.executable,
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
    for line in ("tfjob-local = airflow_tfjob.local.cli:main", "tfjob-runtimes = airflow_tfjob.jobs.trainjob.runtimes:main",
                 "airflow_tfjob = airflow_tfjob.plugins.kill_listener:KubeflowJobPlugin",
                 "provider_info = airflow_tfjob:get_provider_info"):  # fmt: skip
        assert line in entry_points


def test_plain_pip_resolves_the_wheel_in_a_fresh_environment(wheel: Path, tmp_path: Path) -> None:
    # The test venv's pip (the lock's) with --ignore-installed resolves as in an environment with nothing
    # installed, without making one (a venv with pip cost 2-3 s, and its older pip resolved in 21 s where
    # this one takes 6).
    report = tmp_path / "report.json"
    run(sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
        "--disable-pip-version-check", "--report", report, wheel, cwd=tmp_path)  # fmt: skip
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
from airflow_tfjob.jobs.trainjob.runtimes import load_runtimes
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
        sys.executable, "-m", "airflow_tfjob.jobs.trainjob.runtimes", "show", env=installed, cwd=tmp_path
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


def test_a_package_index_accepts_the_wheel_and_the_sdist(wheel: Path, sdist: Path) -> None:
    # --strict: a warning fails too (a long description that would not render on the index among them).
    checked = run(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist).stdout
    assert checked.count("PASSED") == 2, checked
    with zipfile.ZipFile(wheel) as whl:
        info = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.message_from_bytes(whl.read(info))
    classifiers = metadata.get_all("Classifier") or []
    assert {"Framework :: Apache Airflow", "Framework :: Apache Airflow :: Provider"} <= set(classifiers)
    assert metadata["Description-Content-Type"] == "text/markdown"
    # The long description is the README, shown on the index away from the repository: a relative link
    # or image would point nowhere there.
    relative = [t for t in re.findall(r"\]\(([^)\s]+)\)", README) if not re.match(r"[a-z]+://", t)]
    assert relative == []


def test_the_sdist_carries_every_file_of_the_package(sdist: Path) -> None:
    tracked = run("git", "ls-files", "airflow_tfjob", "README.md", "pyproject.toml", cwd=ROOT).stdout.split()
    with tarfile.open(sdist) as archive:
        names = {name.partition("/")[2] for name in archive.getnames()}
    missing = [name for name in tracked if name not in names]
    assert not missing, f"files the sdist leaves out: {missing}"


def readme_block(heading: str, language: str = "") -> str:
    """The first fenced block of the README's section `heading`."""
    section = README.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(rf"(?s)```{language}\n(.*?)```", section)
    assert found, f"no ```{language} block under {heading}"
    return found.group(1)


def test_the_readmes_install_and_dag_work_in_a_fresh_venv(wheel: Path, uv: str, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    # A venv without pip (uv's, in a tenth of a second): the README's pip command runs through the test
    # venv's pip aimed at it (`pip --python`), as that venv's own pip would run it.
    run(uv, "venv", "--quiet", "--python", sys.executable, env_dir)
    python = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    # The README's two commands as written, but for two arguments: the built wheel for its placeholder,
    # and for Airflow's constraints file (GitHub is out of reach here) the lock, which pins the same
    # Airflow release.
    constraints_url = (
        f"https://raw.githubusercontent.com/apache/airflow/constraints-{AIRFLOW}/constraints-3.11.txt"
    )
    commands = [shlex.split(line) for line in readme_block("## Install").splitlines() if line.strip()]
    assert [c[:2] for c in commands] == [["pip", "install"]] * 2
    assert commands[0][2:] == [f"apache-airflow=={AIRFLOW}", "--constraint", constraints_url]
    (placeholder,) = [a for a in commands[1] if a.startswith("airflow-provider-tfjob @ ")]
    assert placeholder.endswith(".whl") and f"apache-airflow=={AIRFLOW}" in commands[1]
    replaced = {constraints_url: str(ROOT / "requirements" / "lock.txt"),
                placeholder: f"airflow-provider-tfjob @ {wheel.as_uri()}"}  # fmt: skip
    # Airflow's own install (the first command: Airflow, pinned by the lock) goes through the project's
    # pinned uv, which installs the same pins from its cache in seconds where pip downloads and
    # unpacks them for minutes; the provider's command, the one this project writes, runs through pip
    # as written. How plain pip resolves the wheel alone is test_plain_pip_resolves_... above.
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "--disable-pip-version-check"]
    for installer, command in zip(([uv, "pip", "install", "--python", python], pip), commands, strict=True):
        argv = [replaced.get(a, a) for a in command[2:]]
        run(*installer, "--quiet", *argv, env=env, cwd=tmp_path)

    # The README's DAG, unchanged, in a DAG folder; a cluster policy (Airflow's airflow_local_settings)
    # sets render_only=True on every task, so the run needs no cluster and shows the manifest.
    code = readme_block("## A first DAG", "python")
    dags, settings, home = tmp_path / "dags", tmp_path / "settings", tmp_path / "home"
    for d in (dags, settings, home):
        d.mkdir()
    (dags / "readme_dag.py").write_text(code)
    (settings / "airflow_local_settings.py").write_text(
        "def task_policy(task):\n    task.render_only = True\n"
    )
    env |= {"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PYTHONPATH": str(settings)}  # fmt: skip
    airflow = env_dir / "bin" / "airflow"
    located = run(python, "-c", "import airflow_tfjob; print(airflow_tfjob.__file__)", env=env, cwd=tmp_path)
    assert located.stdout.startswith(str(env_dir)), located.stdout
    run(airflow, "db", "migrate", env=env, cwd=tmp_path)
    call = next(
        n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "DAG"
    )
    dag_id = ast.literal_eval(call.args[0])
    done = run(airflow, "dags", "test", dag_id, env=env, cwd=tmp_path)
    out = done.stdout + done.stderr
    assert "state=success" in out, out[-3000:]
    shown = re.search(r"(?s)render_only=True: TFJob not submitted\. Manifest:\n(\{.*?\n\})", out)
    assert shown, out[-3000:]
    manifest = json.loads(shown.group(1))
    given = {
        k.arg: ast.literal_eval(k.value)
        for n in ast.walk(ast.parse(code))
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "TFJobOperator"
        for k in n.keywords
        if k.arg in ("worker", "image", "command")
    }
    worker = manifest["spec"]["tfReplicaSpecs"]["Worker"]
    (container,) = worker["template"]["spec"]["containers"]
    assert (worker["replicas"], container["image"], container["command"]) == (
        given["worker"],
        given["image"],
        given["command"],
    )
    # On a CPU cluster: the README's job asks for no GPU.
    assert "nvidia.com/gpu" not in json.dumps(manifest)
