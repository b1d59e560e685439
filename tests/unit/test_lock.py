"""requirements/lock.txt pins, within range, everything pyproject.toml and requirements/lock.in ask for.

`make install` installs the lock exactly and resolves nothing, so a requirement added to pyproject.toml
without `make lock` would be missing from every fresh environment: this test names it first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "lock.txt"
# The interpreter and platform the lock is resolved for (scripts/venv.sh LOCK_PYTHON, LOCK_PLATFORM).
LOCK_ENVIRONMENT = {
    "python_version": "3.11",
    "python_full_version": "3.11.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def pinned(lock_text: str) -> dict[NormalizedName, Version]:
    """The `name==version` lines of a `uv pip compile` output (comments and options skipped)."""
    pins = {}
    for line in lock_text.splitlines():
        if line and not line[0].isspace() and not line.startswith(("#", "-")):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = Version(version.split(";")[0].strip())
    return pins


def requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def declared() -> list[tuple[str, Requirement]]:
    """(where, requirement) for every requirement the lock must satisfy."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    found = [("dependencies", Requirement(text)) for text in project["dependencies"]]
    for extra, texts in project.get("optional-dependencies", {}).items():
        found += [(f"extra {extra!r}", Requirement(text)) for text in texts]
    found += [("build-system", Requirement(text)) for text in pyproject["build-system"]["requires"]]
    found += [("lock.in", Requirement(text)) for text in requirement_lines(ROOT / "requirements/lock.in")]
    return found


def unmet(requirements: list[tuple[str, Requirement]], pins: dict[NormalizedName, Version]) -> list[str]:
    problems = []
    for where, requirement in requirements:
        if requirement.marker is not None and not requirement.marker.evaluate(LOCK_ENVIRONMENT):
            continue
        version = pins.get(canonicalize_name(requirement.name))
        if version is None:
            problems.append(f"{where}: {requirement} is not in the lock")
        elif not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{where}: {requirement} but the lock pins {version}")
    return problems


def test_the_lock_satisfies_every_declared_requirement() -> None:
    problems = unmet(declared(), pinned(LOCK.read_text()))
    assert not problems, "requirements/lock.txt is stale, run `make lock`:\n" + "\n".join(problems)


def test_the_lock_header_names_the_command_that_regenerates_it() -> None:
    header = LOCK.read_text().splitlines()[:2]
    assert "make lock, which runs: uv pip compile pyproject.toml requirements/lock.in --all-extras" in header[1]


@pytest.mark.parametrize(
    ("pins", "expected"),
    [
        ({}, ["extra 'x': torch==2.13.0 is not in the lock"]),
        ({"torch": Version("2.14.0")}, ["extra 'x': torch==2.13.0 but the lock pins 2.14.0"]),
        # A local build (the CPU wheel) satisfies a pin without a label, as pip and uv read it.
        ({"torch": Version("2.13.0+cpu")}, []),
    ],
)
def test_a_missing_or_out_of_range_pin_is_named(pins: dict[str, Version], expected: list[str]) -> None:
    normalized = {canonicalize_name(name): version for name, version in pins.items()}
    assert unmet([("extra 'x'", Requirement("torch==2.13.0"))], normalized) == expected


def test_requirements_for_other_platforms_need_no_pin() -> None:
    assert unmet([("dependencies", Requirement("pywin32>=306; sys_platform == 'win32'"))], {}) == []


def test_lock_lines_are_read_as_pins() -> None:
    text = "# header\na2wsgi==1.10.10\n    # via apache-airflow-core\ntorch==2.13.0+cpu\n"
    assert pinned(text) == {"a2wsgi": Version("1.10.10"), "torch": Version("2.13.0+cpu")}


# requirements/demo.txt: what `make demo` installs, the part of the lock the demo needs (scripts/venv.sh
# compiles it from requirements/demo.in with the lock as constraints).
DEMO_LOCK = ROOT / "requirements" / "demo.txt"
# PyTorch and what its CUDA builds bring from PyPI.
PYTORCH = ("torch", "torchvision", "torchaudio", "triton", "nvidia-")


def test_the_demo_lock_pins_the_locks_versions() -> None:
    lock, demo = pinned(LOCK.read_text()), pinned(DEMO_LOCK.read_text())
    drift = [
        f"{name}=={version} (lock: {lock.get(name)})"
        for name, version in demo.items()
        if lock.get(name) != version
    ]
    assert not drift, "requirements/demo.txt is stale, run `make lock`:\n" + "\n".join(drift)


def test_the_demo_lock_holds_what_the_demo_asks_for_and_no_pytorch() -> None:
    demo = pinned(DEMO_LOCK.read_text())
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    asked = [("dependencies", Requirement(text)) for text in pyproject["project"]["dependencies"]]
    asked += [("demo.in", Requirement(t)) for t in requirement_lines(ROOT / "requirements/demo.in")]
    problems = unmet(asked, demo)
    assert not problems, "requirements/demo.txt is stale, run `make lock`:\n" + "\n".join(problems)
    assert not [name for name in demo if name.startswith(PYTORCH)]
    assert not [name for name in demo if name in ("xgboost-cpu", "pytest", "playwright")]


def test_the_lock_pins_pytorchs_cpu_build_and_nothing_of_cuda() -> None:
    lock = pinned(LOCK.read_text())
    assert lock["torch"].local == "cpu", lock["torch"]
    assert not [name for name in lock if name.startswith(PYTORCH[3:])]
