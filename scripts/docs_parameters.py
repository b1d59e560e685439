"""MkDocs hook: the table of the operators' parameters in docs/api/parameters.md, generated from the code.

The rows come from ``airflow_tfjob.operators.params`` (which kinds have each parameter, whether it is
templated, what it is for) and the types and defaults from ``KubeflowJobOperator.__init__``'s signature,
read by griffe (statically: building the docs imports neither Airflow nor the Kubernetes clients). The
page carries the marker line; the hook replaces it, so the table cannot drift from the code.
"""

from __future__ import annotations

from typing import Any

import griffe

from airflow_tfjob.kinds import KINDS
from airflow_tfjob.operators import params

MARKER = "<!-- parameters-table -->"
ROLES = {
    "job": "names or finds the job",
    "shortcut": "replica count of one type",
    "manifest": "shapes the manifest",
    "own": "the task's behaviour",
    "policy": "which template files may be read",
}


def _signature() -> dict[str, griffe.Parameter]:
    module: Any = griffe.load("airflow_tfjob.operators.kubeflow", search_paths=["."])
    init = module["KubeflowJobOperator"].members["__init__"]
    return {p.name: p for p in init.parameters}


def _cell(value: object) -> str:
    # A code span keeps its pipes out of the table's cells.
    return f"`{value}`" if value not in (None, "", "None") else ""


def parameters_table() -> str:
    signature = _signature()
    header = ["Parameter", "Type", "Default", "Templated", "Role", *(k.kind for k in KINDS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in params.GENERIC.rows:
        parameter = signature.get(row.name)
        if parameter is None:  # the drift test (tests/unit/test_operator_params.py) reports this first
            raise ValueError(f"{row.name} is in operators/params.py but not in KubeflowJobOperator.__init__")
        kinds = ["yes" if row.kinds is None or k.kind in row.kinds else "" for k in KINDS]
        default = str(parameter.default)
        cells = [
            f"`{row.name}`",
            _cell(parameter.annotation),
            _cell(default),
            "yes" if row.templated else "",
            ROLES[row.role],
            *kinds,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, parameters_table())
