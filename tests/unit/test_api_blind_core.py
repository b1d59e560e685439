"""The core is API-blind: no core module imports a job API's own package, names a kind's row or compares
with a kind's or an API's name. What differs between APIs is asked of their adapters (airflow_tfjob/jobs/).

Read from the source (ast), so a lazy import inside a function counts as much as one at the top. Every
module of the provider is either in CORE or in EXCLUDED with the reason, so a new module has to be
placed: a module added to the core is checked from its first line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import airflow_tfjob
from airflow_tfjob.jobs import kinds

PACKAGE = Path(airflow_tfjob.__file__).parent

#: The modules that must not know which API a job is of (paths under airflow_tfjob/).
CORE = (
    "__init__.py",
    "_moved.py",
    "build/__init__.py",
    "build/checker.py",
    "build/container_validation.py",
    "build/convert.py",
    "build/kind_rules.py",  # KIND_RULES is keyed by kind name (data), it compares with none
    "build/kindparts.py",
    "build/limits.py",
    "build/manifest.py",
    "build/checkpoints.py",
    "build/naming.py",
    "build/params.py",
    "build/paramtypes.py",
    "build/placement.py",
    "build/pod_validation.py",
    "build/secrets.py",
    "build/shape.py",
    "build/submission.py",
    "build/templates.py",
    "build/validation.py",
    "constants.py",
    "version_compat.py",
    "decorators/__init__.py",
    "decorators/replica_function.py",
    "follow/__init__.py",
    "follow/core.py",
    "follow/cleanup.py",
    "follow/cost.py",
    "follow/diagnosis.py",
    "follow/diagnostics.py",
    "follow/failure.py",
    "follow/logs_parsing.py",
    "follow/checkpoints.py",
    "follow/metrics.py",
    "follow/next_read.py",
    "follow/outcome.py",
    "follow/parts.py",
    "follow/progress.py",
    "follow/replica_logs.py",
    "follow/returned.py",
    "follow/summary.py",
    "follow/tap.py",
    "hooks/__init__.py",
    "hooks/aio.py",
    "hooks/calls.py",
    "hooks/clients.py",
    "hooks/common.py",
    "hooks/connection.py",
    "hooks/exec_auth.py",
    "hooks/jobwatch.py",
    "hooks/kueue.py",
    "hooks/retry.py",
    "hooks/streams.py",
    "hooks/sync.py",
    "hooks/tfjob.py",
    "hooks/waits.py",
    "hooks/watching.py",
    "integrations/__init__.py",
    "integrations/assets.py",
    "integrations/kueue/__init__.py",
    "integrations/kueue/multikueue.py",
    "integrations/kueue/note.py",
    "integrations/kueue/part.py",
    "integrations/kueue/tracker.py",
    "integrations/kueue/workload.py",
    "integrations/lineage.py",
    "integrations/links.py",
    "integrations/parts.py",
    "integrations/sweeps.py",
    "integrations/tensorboard.py",
    "jobs/__init__.py",
    "jobs/status.py",
    "operators/__init__.py",
    "operators/building.py",
    "operators/checks.py",
    "operators/following.py",
    "operators/checkpointing.py",
    "operators/identity.py",
    "operators/kubeflow.py",
    "operators/lineage.py",
    "operators/outcome.py",
    "operators/retry_policy.py",
    "operators/retry_fallback.py",
    "operators/runs.py",
    "operators/submit.py",
    "operators/templating.py",
    "plugins/__init__.py",
    "preflight/__init__.py",
    "preflight/checks.py",
    "preflight/cli.py",
    "preflight/failures.py",
    "preflight/report.py",
    "plugins/kubeflow.py",
    "sensors/__init__.py",
    "sensors/checks.py",
    "sensors/kubeflow.py",
    "sensors/runs.py",
    "triggers/__init__.py",
    "triggers/asset_runs.py",
    "triggers/assets.py",
    "triggers/kubeflow.py",
    "triggers/loader.py",
    "triggers/positions.py",
    "triggers/runs.py",
    "hooks/supervisor.py",
    "triggers/tfjob.py",  # 0.1.0's names of the triggers
)

#: Modules (or packages, ending in "/") that may name a kind or an API, and why.
EXCLUDED = {
    "jobs/kinds.py": "the kind table itself: one row per kind (the jobs/ room's data)",
    "jobs/adapter.py": "the adapter interface and its registry, which names each API's adapter module",
    "jobs/v1.py": "the kubeflow.org/v1 kinds' adapter",
    "jobs/trainjob/": "Trainer v2's adapter and the pure TrainJob code it calls",
    "local/": "the embedded cluster: one controller per kind, as the training-operator has",
    "operators/tfjob.py": "TFJobOperator: a kind's own class names its kind",
    "operators/pytorchjob.py": "PyTorchJobOperator: a kind's own class",
    "operators/xgboostjob.py": "XGBoostJobOperator: a kind's own class",
    "operators/jaxjob.py": "JAXJobOperator: a kind's own class",
    "operators/paddlejob.py": "PaddleJobOperator: a kind's own class",
    "operators/trainjob.py": "TrainJobOperator: a kind's own class",
    "operators/trainjob_params.py": "TrainJobOperator's parameter table",
    "operators/api_choice.py": "TFJob's own `api` parameter (run a TFJob on Trainer v2): it names the two "
    "kinds it chooses between and asks Trainer v2's discovery",
    "operators/params.py": "the operators' parameter table: rows name the kinds that take them, and "
    "TFJobOperator's set (params.NAMES...) is built there (its reshaping is issue 21's item 4)",
    "preflight/needs.py": "the preflight's table of what each API needs (its install, runtimes, JobSet): "
    "looked up by a kind row's `api`, it names each API once",
    "sensors/tfjob.py": "TFJobSensor: a kind's own class",
    "sensors/pytorchjob.py": "PyTorchJobSensor: a kind's own class",
    "sensors/xgboostjob.py": "XGBoostJobSensor: a kind's own class",
    "sensors/jaxjob.py": "JAXJobSensor: a kind's own class",
    "sensors/paddlejob.py": "PaddleJobSensor: a kind's own class",
    "sensors/trainjob.py": "TrainJobSensor: a kind's own class",
    "decorators/pytorchjob.py": "pytorchjob_task: a kind's own decorator",
    "decorators/tfjob.py": "tfjob_task: a kind's own decorator",
}

#: The rows of the kind table by their constant's name (TFJOB, TRAINJOB, PYTORCHJOB...).
KIND_CONSTANTS = frozenset(
    name for name, value in vars(kinds).items() if isinstance(value, kinds.JobKind) and name != "DEFAULT_KIND"
)
#: The words that name a kind or an API: kind, plural, singular, group, API.
API_WORDS = frozenset(
    word
    for kind in kinds.ALL_KINDS
    for word in (
        kind.kind,
        kind.kind.lower(),
        kind.plural,
        kind.singular,
        kind.group,
        kind.api_version,
        kind.api,
    )
) - {kinds.GROUP}  # "kubeflow.org" alone names every v1 kind's group, not one API
#: Packages that are one API's own.
API_PACKAGES = ("airflow_tfjob.jobs.trainjob", "airflow_tfjob.jobs.v1")


def _named_for_tfjob(function: str) -> bool:
    """The TFJob-named aliases the provider had before other kinds (``create_tfjob``, ``build_tfjob``...;
    the recorded public API): each is the generic call with TFJob's row, which is what they are for."""
    return "tfjob" in function.lower()


class _Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[str] = []
        self.functions: list[str] = []

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.startswith(API_PACKAGES):
                self.found.append(f"line {node.lineno}: imports {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        names = [f"{module}.{alias.name}" for alias in node.names]
        for name in (module, *names):
            if name.startswith(API_PACKAGES) and (name == module or not module.startswith(API_PACKAGES)):
                self.found.append(f"line {node.lineno}: imports {name}")

    def _constant(self, name: str, lineno: int) -> None:
        if name not in KIND_CONSTANTS:
            return
        if name == "TFJOB" and self.functions and _named_for_tfjob(self.functions[-1]):
            return
        self.found.append(f"line {lineno}: names the kind row {name}")

    def visit_Name(self, node: ast.Name) -> None:
        self._constant(node.id, node.lineno)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._constant(node.attr, node.lineno)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        for side in (node.left, *node.comparators):
            items = side.elts if isinstance(side, ast.Tuple | ast.List | ast.Set) else [side]
            for item in items:
                if isinstance(item, ast.Constant) and item.value in API_WORDS:
                    self.found.append(f"line {node.lineno}: compares with {item.value!r}")
        self.generic_visit(node)


def api_knowledge(source: str) -> list[str]:
    """What in a module's source names a job API: its package imported, a kind's row, a comparison with
    a kind's or an API's name."""
    finder = _Finder()
    finder.visit(ast.parse(source))
    return finder.found


def _modules(root: Path) -> Iterator[str]:
    for path in sorted(root.rglob("*.py")):
        yield path.relative_to(root).as_posix()


def _excluded(module: str) -> bool:
    return any(module == key or (key.endswith("/") and module.startswith(key)) for key in EXCLUDED)


def core_violations(root: Path = PACKAGE) -> dict[str, list[str]]:
    """Each core module under ``root`` (an airflow_tfjob tree) that names a job API, with where."""
    found = {}
    for module in CORE:
        path = root / module
        if path.exists():
            problems = api_knowledge(path.read_text())
            if problems:
                found[module] = problems
    return found


def test_no_core_module_names_a_job_api() -> None:
    assert core_violations() == {}, "ask the job's adapter (airflow_tfjob/jobs/adapter.py) instead"


def test_every_module_is_core_or_excluded_with_a_reason() -> None:
    modules = list(_modules(PACKAGE))
    unplaced = [m for m in modules if m not in CORE and not _excluded(m)]
    assert unplaced == [], "add each to CORE, or to EXCLUDED saying why it may name a job API"
    assert not [m for m in CORE if _excluded(m)]
    assert all(m in modules for m in CORE), "CORE names a module that does not exist"


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("from airflow_tfjob.jobs.trainjob import pods\n", "imports airflow_tfjob.jobs.trainjob"),
        (
            "def f():\n    from airflow_tfjob.jobs.trainjob.status import interpret\n",
            "imports airflow_tfjob.jobs.trainjob",
        ),
        ("from airflow_tfjob.jobs import trainjob\n", "imports airflow_tfjob.jobs.trainjob"),
        ("import airflow_tfjob.jobs.trainjob.pods\n", "imports airflow_tfjob.jobs.trainjob"),
        ("from airflow_tfjob.jobs.v1 import interpret\n", "imports airflow_tfjob.jobs.v1"),
        ("def f(kind):\n    return kind is TRAINJOB\n", "names the kind row TRAINJOB"),
        ("def f(kind):\n    return kinds.PYTORCHJOB\n", "names the kind row PYTORCHJOB"),
        ("def default(kind=TFJOB):\n    return kind\n", "names the kind row TFJOB"),
        ("def f(job):\n    return job.get('kind') == 'TrainJob'\n", "compares with 'TrainJob'"),
        ("def f(api):\n    return api in ('tfjob', 'auto')\n", "compares with 'tfjob'"),
        (
            "def f(kind):\n    return kind.group != 'trainer.kubeflow.org'\n",
            "compares with 'trainer.kubeflow.org'",
        ),
    ],
)
def test_the_check_sees_each_way_of_naming_an_api(source: str, what: str) -> None:
    found = api_knowledge(source)
    assert found and what in found[0]


def test_the_check_lets_the_core_ask_adapters_and_keep_tfjob_aliases() -> None:
    allowed = (
        "from airflow_tfjob.jobs.adapter import adapter_for\n"
        "def f(kind, job):\n    return adapter_for(kind).interpret(job)\n"
        "def create_tfjob(self, body):\n    return self.create_job(TFJOB, body)\n"
        "def list_job_pods(name, kind='TFJob'):\n    return name\n"  # a recorded public default
        "RULES = {'TFJob': (), 'PyTorchJob': ()}\n"  # a table keyed by kind: data
    )
    assert api_knowledge(allowed) == []
