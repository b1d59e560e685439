"""The house's shape, checked: imports name the module that defines what they take, and the top level
holds only rooms and a few shared leaves.

The walls between the rooms are import-linter's contracts (pyproject.toml, run by ``make lint``); what
they cannot express is checked here.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import airflow_tfjob

PACKAGE = Path(airflow_tfjob.__file__).parent

# The modules whose purpose is to give public names one path (DAGs import the hooks', Airflow's stored
# rows name the 0.1.0 builds' triggers); the provider's own code never imports through them.
PUBLIC_FACADES = {"airflow_tfjob.hooks.kubeflow_job", "airflow_tfjob.triggers.tfjob"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _provider_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "local" not in p.relative_to(PACKAGE).parts[:1])


def _defined_names(tree: ast.Module) -> set[str]:
    """Names a module defines itself (functions, classes, assignments), and those it exports on purpose
    (listed in its ``__all__``), not the ones it merely imports."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                if isinstance(node.value, ast.List | ast.Tuple):
                    names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


@functools.cache
def _names_defined_in(source: Path) -> frozenset[str]:
    # Parsed once per module: the provider's modules import a few hundred names from the same few dozen.
    return frozenset(_defined_names(ast.parse(source.read_text())))


def _source_of(module: str) -> Path | None:
    path = PACKAGE.parent / Path(*module.split("."))
    if (path / "__init__.py").exists():
        return path / "__init__.py"
    if path.with_suffix(".py").exists():
        return path.with_suffix(".py")
    return None


def test_internal_imports_name_the_defining_module() -> None:
    wrong = []
    for path in _provider_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("airflow_tfjob"):
                continue
            module = node.module or ""
            source = _source_of(module)
            if source is None:
                wrong.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: no module {module}")
                continue
            defined = _names_defined_in(source)
            for alias in node.names:
                if _source_of(f"{module}.{alias.name}") is not None:
                    continue  # a submodule
                if module in PUBLIC_FACADES and _module_name(path) != module:
                    wrong.append(f"{path.relative_to(PACKAGE)}:{node.lineno} imports through facade {module}")
                    continue
                if alias.name in defined:
                    continue
                wrong.append(
                    f"{path.relative_to(PACKAGE)}:{node.lineno} takes {alias.name} from {module}, "
                    "which does not define it"
                )
    assert not wrong, "\n".join(wrong)


def test_the_top_level_holds_rooms_and_shared_leaves_only() -> None:
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert modules == ["__init__.py", "constants.py", "version_compat.py"]
    rooms = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert rooms == [
        "build",
        "decorators",
        "follow",
        "hooks",
        "integrations",
        "jobs",
        "local",
        "operators",
        "plugins",
        "preflight",
        "sensors",
        "triggers",
    ]


def test_every_room_states_its_contract() -> None:
    missing = [
        str(init.relative_to(PACKAGE))
        for init in PACKAGE.rglob("__init__.py")
        if not (ast.get_docstring(ast.parse(init.read_text())) or "").strip()
    ]
    assert not missing, f"packages without a docstring stating their contract: {missing}"


#: What importing the operator's trigger class may load of the provider. The triggerer imports a
#: trigger's class on its event loop (``TriggerRunner.create_triggers``); everything its run needs is
#: imported on a thread of its own (``triggers.loader.RUN_MODULES``), so the class's module keeps to
#: what the constructor and ``serialize`` need.
TRIGGER_CLASS_IMPORTS = {
    "airflow_tfjob",
    "airflow_tfjob.constants",
    "airflow_tfjob.hooks",
    "airflow_tfjob.hooks.connection",
    "airflow_tfjob.triggers",
    "airflow_tfjob.triggers.deferral",
    "airflow_tfjob.triggers.loader",
}


def test_the_triggerer_imports_the_trigger_class_without_the_follow() -> None:
    probe = (
        "import sys, airflow.jobs.triggerer_job_runner\n"
        "try:\n    from airflow._shared.module_loading import import_string\n"
        "except ImportError:  # before 3.2\n    from airflow.utils.module_loading import import_string\n"
        "import_string('airflow_tfjob.triggers.deferral.KubeflowJobTrigger')\n"
        "import_string('airflow_tfjob.triggers.deferral.KubeflowJobConditionTrigger')\n"
        "print('loaded:', *(m for m in sys.modules if m.startswith('airflow_tfjob')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(next(x for x in done.stdout.splitlines() if x.startswith("loaded:")).split()[1:])
    assert loaded - TRIGGER_CLASS_IMPORTS == set(), "imported on the triggerer's loop; import them in run()"
    assert "airflow_tfjob.triggers.deferral" in loaded


def test_the_loader_imports_every_run_module_and_every_adapter() -> None:
    """What the triggers' runs import by name (each API's adapter, through the registry) is loaded off the
    loop with the run modules."""
    probe = (
        "import asyncio, sys\n"
        "from airflow_tfjob.triggers.loader import RUN_MODULES, load_run_modules\n"
        "asyncio.run(load_run_modules())\n"
        "from airflow_tfjob.jobs.adapter import ADAPTER_MODULES\n"
        "print('missing:', *(m for m in (*RUN_MODULES, *ADAPTER_MODULES.values()) if m not in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    said = next(line for line in done.stdout.splitlines() if line.startswith("missing:"))
    assert said.split() == ["missing:"], said
