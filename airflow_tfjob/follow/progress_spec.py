"""The ``progress`` parameter: its shape and the spec it becomes (what counts as progress, and how
often a line is printed).

Apart from the progress part (:mod:`airflow_tfjob.follow.progress`) because the operator checks the
parameter when a DAG file is parsed: this module imports only the checker, where the part imports the
follow core's metrics and parts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from airflow_tfjob.build.checker import JobValidationError

DEFAULT_EVERY = 30.0
_METRIC_NAME = re.compile(r"[\w|-]+")
_FIX = 'give progress={"metric": "epoch", "total": 10} (total: a number, or the hyperparameter holding it)'


@dataclass(frozen=True)
class ProgressSpec:
    """What counts as progress: ``metric`` going from 0 to ``total``; a line at most every ``every`` s."""

    metric: str
    total: float
    every: float = DEFAULT_EVERY

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProgressSpec:
        return cls(str(data["metric"]), float(data["total"]), float(data.get("every", DEFAULT_EVERY)))


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def check_progress(progress: Any) -> None:
    """The parameter's shape, before anything runs (a template string is checked once rendered)."""
    if progress is None or isinstance(progress, str):
        return
    if not isinstance(progress, Mapping):
        raise JobValidationError("progress", f"must be a dict, got {type(progress).__name__}", _FIX)
    unknown = sorted(set(progress) - {"metric", "total", "every"})
    if unknown:
        raise JobValidationError("progress", f"unknown keys {unknown}", _FIX)
    metric = progress.get("metric")
    if not isinstance(metric, str) or not _METRIC_NAME.fullmatch(metric):
        raise JobValidationError(
            "progress.metric",
            f"{metric!r} is not a metric name the job can print (letters, digits, _ - |)",
            _FIX,
        )
    if "total" not in progress:
        raise JobValidationError("progress.total", "is missing", _FIX)
    total = progress["total"]
    if not isinstance(total, (int, float, str)) or isinstance(total, bool):
        raise JobValidationError(
            "progress.total", f"must be a number or a hyperparameter's name, got {total!r}", _FIX
        )
    number = _number(total)
    if number is not None and number <= 0:
        raise JobValidationError("progress.total", f"must be above 0, got {total!r}", _FIX)
    every = progress.get("every", DEFAULT_EVERY)
    if _number(every) is None or float(every) < 0:
        raise JobValidationError("progress.every", f"must be a number of seconds >= 0, got {every!r}", _FIX)


def progress_spec(progress: Any, hyperparameters: Mapping[str, Any] | None) -> ProgressSpec | None:
    """The rendered parameter as a spec: ``total`` a number, or the name of the hyperparameter holding it."""
    if progress is None:
        return None
    if isinstance(progress, str):
        raise JobValidationError("progress", f"must be a dict, got the string {progress!r}", _FIX)
    check_progress(progress)
    total = _number(progress["total"])
    if total is None:
        name = str(progress["total"])
        given = (hyperparameters or {}).get(name)
        total = _number(given)
        if total is None or total <= 0:
            raise JobValidationError(
                "progress.total",
                f"names the hyperparameter {name!r}, whose value {given!r} is not a number above 0",
                _FIX,
            )
    return ProgressSpec(progress["metric"], total, float(progress.get("every", DEFAULT_EVERY)))
