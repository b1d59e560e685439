"""Checks of the sensors' parameters (every kind's), before their first call to the cluster.

The same wording as the operator's checks (:mod:`airflow_tfjob.build.naming` for the job's name and
namespace): a name that cannot be a TFJob's would otherwise make the sensor wait, politely, for a
job that can never exist until its timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_tfjob.build.checker import JobValidationError, Problem
from airflow_tfjob.build.naming import NAME_FIX, NAMESPACE_FIX, job_name_problem, namespace_problem
from airflow_tfjob.jobs.status import TARGET_CONDITIONS
from airflow_tfjob.operators.shared_checks import is_template

_OPTIONAL_STRINGS = ("cluster_context", "config_file")


def check_sensor_parameters(
    values: Mapping[str, Any], *, at_parse: bool = False, kind: str = "TFJob"
) -> None:
    """Raise JobValidationError naming every bad parameter of ``values`` (absent keys not checked).

    ``at_parse``: Jinja templates are left for the check after rendering.
    """
    if at_parse:
        values = {k: v for k, v in values.items() if not is_template(v)}
    problems: list[Problem] = []
    if "name" in values:
        problem = job_name_problem(values["name"])
        if problem:
            problems.append(Problem("name", problem, NAME_FIX))
    if values.get("namespace") is not None:
        problem = namespace_problem(values["namespace"])
        if problem:
            problems.append(Problem("namespace", problem, NAMESPACE_FIX))
    if "target_condition" in values and values["target_condition"] not in TARGET_CONDITIONS:
        problems.append(
            Problem(
                "target_condition",
                f"{values['target_condition']!r} is not a condition the sensor waits for",
                f"use one of {', '.join(map(repr, TARGET_CONDITIONS))} (case-sensitive)",
            )
        )
    conn_id = values.get("kubernetes_conn_id", "kubernetes_default")
    if not isinstance(conn_id, str) or not conn_id:
        problems.append(
            Problem(
                "kubernetes_conn_id", f"{conn_id!r} is not a connection id", "use e.g. 'kubernetes_default'"
            )
        )
    for key in _OPTIONAL_STRINGS:
        if values.get(key) is not None and not isinstance(values[key], str):
            problems.append(
                Problem(key, f"{values[key]!r} is not a string", f"pass {key} as a string, or None")
            )
    for key in ("in_cluster", "deferrable"):
        if values.get(key) is not None and not isinstance(values[key], bool):
            problems.append(Problem(key, f"{values[key]!r} is not a boolean", "use True or False"))
    if problems:
        raise JobValidationError(problems, kind=kind)  # the sensed job's kind, not always a TFJob
