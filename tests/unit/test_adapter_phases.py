"""The job adapters' interface is cut by phase (jobs/adapter.py): facts about a manifest, reading a job,
building one. These tests hold the cut (every method in exactly one phase, nothing outside them) and the
conformance check's reach (each registry module returns its adapter as a JobAdapter, which mypy then
checks structurally, as `make lint` runs it)."""

from __future__ import annotations

import importlib
import inspect

import pytest

from airflow_tfjob.jobs.adapter import (
    ADAPTER_MODULES,
    BuildsJob,
    JobAdapter,
    ManifestFacts,
    ReadsJob,
    adapter_for,
)
from airflow_tfjob.jobs.kinds import ALL_KINDS

PHASES = (ManifestFacts, ReadsJob, BuildsJob)


def members(protocol: type) -> set[str]:
    """The methods a Protocol declares itself (not those it inherits)."""
    return {
        name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_")
    }


def test_every_method_of_the_interface_belongs_to_exactly_one_phase() -> None:
    declared = [members(phase) for phase in PHASES]
    for i, first in enumerate(declared):
        for second in declared[i + 1 :]:
            assert not first & second, f"in two phases: {sorted(first & second)}"
    assert not members(JobAdapter), "JobAdapter only joins the phases: a new question goes into one of them"
    every = set().union(*declared)
    assert every == {name for name in dir(JobAdapter) if not name.startswith("_") and callable(getattr(JobAdapter, name))}


@pytest.mark.parametrize("module", sorted(ADAPTER_MODULES.values()))
def test_each_registry_module_returns_its_adapter_as_the_interface(module: str) -> None:
    """The annotation is what makes mypy check the class against every phase; a module returning its own
    class would let a missing method through until a job of that API is read."""
    entry = importlib.import_module(module).adapter
    assert inspect.signature(entry).return_annotation in ("JobAdapter", JobAdapter)


@pytest.mark.parametrize("kind", ALL_KINDS, ids=lambda k: k.kind)
def test_every_kinds_adapter_answers_every_phase(kind: object) -> None:
    adapter = adapter_for(kind)  # type: ignore[arg-type]
    for phase in PHASES:
        missing = sorted(name for name in members(phase) if not callable(getattr(adapter, name, None)))
        assert not missing, f"{adapter!r} lacks {phase.__name__}: {missing}"
