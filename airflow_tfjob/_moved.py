"""The module paths of release 0.1.0 that moved into the provider's rooms, kept importable.

Release 0.1.0 had 41 flat modules; they now live in packages (``jobs``, ``build``, ``hooks``, ``follow``,
``integrations``). A DAG, a plugin or a pickled object may still name an old path (``airflow_tfjob.kinds``,
``airflow_tfjob.manifest``, ``airflow_tfjob.links.TensorBoardLink``...), so an import of an old path gets the
new module itself, the same object under both names: no second copy whose classes would differ, and a
patch applied through either name is seen through the other. The provider's own code imports the new
paths only (import-linter's contracts and ``tests/unit/test_house.py`` check that).

This module is standard library only and costs nothing until an old path is imported: Airflow's
providers manager imports the package in every process.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

#: old path -> new path, both under ``airflow_tfjob``. A moved package's submodules follow it.
MOVED: dict[str, str] = {
    "kinds": "jobs.kinds",
    "trainjob": "jobs.trainjob",
    "manifest": "build.manifest",
    "manifest_params": "build.params",
    "manifest_convert": "build.convert",
    "manifest_kinds": "build.kindparts",
    "manifest_placement": "build.placement",
    "validation": "build.validation",
    "validation_kinds": "build.kind_rules",
    "pod_validation": "build.pod_validation",
    "validation_checker": "build.checker",
    "container_validation": "build.container_validation",
    "paramtypes": "build.paramtypes",
    "shape": "build.shape",
    "limits": "build.limits",
    "secrets": "build.secrets",
    "templates": "build.templates",
    "naming": "build.naming",
    "watching": "hooks.watching",
    "watch": "hooks.jobwatch",
    "connection": "hooks.connection",
    "follow_outcome": "follow.outcome",
    "follow_diagnosis": "follow.diagnosis",
    "logs_follow": "follow.replica_logs",
    "logs": "follow.replica_logs",
    "logs_parsing": "follow.logs_parsing",
    "diagnostics": "follow.diagnostics",
    "status": "jobs.status",
    "metrics": "follow.metrics",
    "progress": "follow.progress",
    "cleanup": "follow.cleanup",
    "summary": "follow.summary",
    "aio": "hooks.waits",
    "kueue": "integrations.kueue",
    "lineage": "integrations.lineage",
    "tensorboard": "integrations.tensorboard",
    "links": "integrations.links",
    "sweeps": "integrations.sweeps",
    "plugin": "plugins.kill_listener",
    "identity": "operators.identity",
}

_PREFIX = "airflow_tfjob."


def new_path(old: str) -> str | None:
    """The module an old dotted path now names (``airflow_tfjob.kueue.note`` ->
    ``airflow_tfjob.integrations.kueue.note``), or None when ``old`` did not move."""
    if not old.startswith(_PREFIX):
        return None
    rest = old[len(_PREFIX) :]
    head, _, tail = rest.partition(".")
    target = MOVED.get(head)
    if target is None:
        return None
    return _PREFIX + target + (f".{tail}" if tail else "")


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old path to the moved module (the loader hands back the module already imported)."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = new_path(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, origin=new)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = new_path(spec.name)
        assert new is not None  # find_spec gave this spec only for a moved path
        warnings.warn(
            f"{spec.name} moved to {new}; the old path keeps working",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was executed when it was imported under its own name."""


def install() -> None:
    """Put the resolver first on ``sys.meta_path``, once per process: a moved package's submodule
    (``airflow_tfjob.kueue.note``) would otherwise be found by the path finder in the package's new
    directory and run a second time under the old name."""
    if not any(isinstance(finder, _OldPaths) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OldPaths())
