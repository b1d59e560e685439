"""Every Python snippet on the user pages works as written: a reader copies one into a DAG file and it
imports, defines its DAG, and renders its jobs.

Each ```python block of a user page (the pages that say how to use the provider; the development,
architecture and behaviour pages are not among them) is run alone in a fresh namespace, so a name it
uses without importing fails it. Every operator it builds is then rendered with ``render_only=True``
(the manifest built and validated, nothing sent to a cluster), which must log none of the provider's
warnings: an example that trips one teaches the reader the wrong thing. A block that is only a value
(a result dict the page shows) is not a program and is left out; one that runs in the image rather than
in Airflow is only compiled.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import re
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
USER_PAGES = [
    "index.md",
    "tour.md",
    "installation.md",
    "connection.md",
    "recipes.md",
    "troubleshooting.md",
    "security.md",
    "local-cluster-usage.md",
    *sorted(str(page.relative_to(DOCS)) for page in (DOCS / "howto").glob("*.md")),
]


@dataclass(frozen=True)
class Snippet:
    page: str
    line: int
    code: str
    # The template files the page shows (a ```yaml block whose first line is "# dags/<path>"), by path
    # relative to the DAG folder: a snippet naming one finds it there.
    templates: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def snippets() -> Iterator[Snippet]:
    for page in USER_PAGES:
        text = (DOCS / page).read_text()
        templates = tuple(re.findall(r"(?ms)^```yaml\n# dags/(\S+)\n(.*?)^```", text))
        for found in re.finditer(r"(?ms)^```python\n(.*?)^```", text):
            yield Snippet(page, text.count("\n", 0, found.start()) + 1, found.group(1), templates)


def is_value(code: str) -> bool:
    """A block that is only literal values (a result the page shows), with comments."""
    body = ast.parse(code).body
    return all(isinstance(node, ast.Expr) and _literal(node.value) for node in body)


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


# A program that runs in the replicas, not in Airflow (the first-DAG page's training program) says so on
# its first line: it is compiled, not run.
IN_THE_IMAGE = "# In the image:"
PROGRAMS = [snippet for snippet in snippets() if not is_value(snippet.code)]


@dataclass
class _TI:
    dag_id: str
    task_id: str
    run_id: str = "manual__2025-01-01T00:00:00+00:00"
    map_index: int = -1
    try_number: int = 1


def _load(dag_file: Path) -> list[Any]:
    """Run ``dag_file`` as Airflow's DAG processor does (a module of its own, every ``with DAG(...)``
    block registered whether or not the file keeps it in a variable) and return its DAGs."""
    from airflow.sdk.definitions._internal.contextmanager import DagContext

    name = f"doc_snippet_{dag_file.stem}"
    spec = importlib.util.spec_from_file_location(name, dag_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    DagContext.current_autoregister_module_name = name
    try:
        spec.loader.exec_module(module)
        return [dag for dag, registered in DagContext.autoregistered_dags if registered is module]
    finally:
        DagContext.current_autoregister_module_name = None
        DagContext.autoregistered_dags = {
            (d, m) for d, m in DagContext.autoregistered_dags if m is not module
        }
        del sys.modules[name]


class _Connections:
    """What ``{{ conn.<id>.password }}`` reads in a template: a stand-in for each connection id."""

    def __getattr__(self, conn_id: str) -> Any:
        return SimpleNamespace(conn_id=conn_id, login="user", password="secret", host="host", extra_dejson={})


def _render(operator: Any) -> dict[str, Any]:
    dag = operator.dag if operator.has_dag() else None
    params = {name: param.value for name, param in (dag.params.items() if dag else [])}
    ti = _TI(dag.dag_id if dag else "snippet", operator.task_id)
    context: dict[str, Any] = {
        "ti": ti,
        "params": params,
        "run_id": ti.run_id,
        "ds": "2025-01-01",
        "ds_nodash": "20250101",
        "logical_date": None,
        "dag": dag,
        "conn": _Connections(),
    }
    operator.render_template_fields(context)
    operator.render_only = True
    result: dict[str, Any] = operator.execute(context)
    return result


class _Warnings(logging.Handler):
    """The provider modules' own loggers (the operators log through Airflow's structlog, captured apart)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("airflow_tfjob"):
            self.records.append(f"{record.name}: {record.getMessage()}")


# Airflow's own warning when execute() is called by a test rather than its task runner.
NOT_THE_PROVIDERS = "cannot be called outside of the Task Runner"


def test_the_user_pages_have_programs() -> None:
    # A change to the extraction that finds nothing would let every snippet go unchecked.
    assert len(PROGRAMS) >= 20
    assert {snippet.page for snippet in PROGRAMS} >= {"tour.md", "howto/first-dag.md", "recipes.md"}


@pytest.mark.parametrize("snippet", PROGRAMS, ids=str)
def test_the_snippet_runs_as_written(
    snippet: Snippet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import structlog.testing

    from airflow_tfjob.operators.generic import KubeflowJobOperator
    from airflow_tfjob.operators.trainjob import TrainJobOperator

    if snippet.code.startswith(IN_THE_IMAGE):
        compile(snippet.code, str(snippet), "exec")
        return
    monkeypatch.chdir(tmp_path)
    for path, template in snippet.templates:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(template)
    # A file, as a DAG file is: the task decorators read their function's source.
    dag_file = tmp_path / f"snippet_{snippet.line}.py"
    dag_file.write_text(snippet.code)
    handler = _Warnings()
    logging.getLogger().addHandler(handler)
    try:
        with warnings.catch_warnings(), structlog.testing.capture_logs() as logs:
            # A moved import path or a deprecated parameter in an example is a warning the reader inherits.
            warnings.simplefilter("error", DeprecationWarning)
            operators = [task for dag in _load(dag_file) for task in dag.tasks]
            rendered = [
                _render(operator)
                for operator in operators
                if isinstance(operator, (KubeflowJobOperator, TrainJobOperator))
            ]
    finally:
        logging.getLogger().removeHandler(handler)
    if re.search(r"^from airflow_tfjob\.operators|@task\.(tfjob|pytorchjob)", snippet.code, re.M):
        # Operators outside a DAG would be checked by nobody, and a scheduler would never run them.
        assert operators, f"{snippet}: its operators belong in a `with DAG(...)` block"
    assert all(result["rendered_only"] for result in rendered)
    warned = [
        str(log["event"])
        for log in logs
        if log["log_level"] in ("warning", "error") and NOT_THE_PROVIDERS not in str(log["event"])
    ]
    assert handler.records + warned == [], f"{snippet}: the provider warned"
