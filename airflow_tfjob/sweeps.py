"""Ranking the trials of a hyperparameter sweep: one mapped training task per trial, then one task that
picks the best from what each trial reported (pure; cheap to import in a DAG file).

A sweep maps the operator over its trials' hyperparameters and reads every trial's final metrics back
from the mapped task's ``metrics`` XCom::

    train = TFJobOperator.partial(task_id="train", ...).expand(hyperparameters=grid)

    @task
    def pick_best(hyperparameters, metrics):
        return rank_trials(hyperparameters, metrics, "test_accuracy", tie_breakers=[("loss", "min")])

    pick_best(grid, train.output["metrics"])

A trial that reported no objective (its job printed none, or its metrics are None) is listed but not
ranked; a NaN does not win either.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["rank_trials"]

_MODES = ("max", "min")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def rank_trials(
    hyperparameters: Sequence[Mapping[str, Any]],
    metrics: Sequence[Mapping[str, Any] | None],
    objective: str,
    *,
    mode: str = "max",
    tie_breakers: Sequence[tuple[str, str]] = (),
    log: Any = print,
) -> dict[str, Any]:
    """The sweep's trials ranked by ``objective`` (``mode`` "max" or "min"), ties broken by the
    ``(metric, mode)`` pairs of ``tie_breakers`` in order (a trial without a tie-breaker comes last
    among its equals), then by trial number.

    Returns ``{"best": <trial>, "ranking": [trial numbers, best first], "trials": [every trial]}``,
    a trial being ``{"trial": i, "hyperparameters": {...}, <objective>: value, <tie-breaker>: value}``
    with the values as reported (None when absent). Each ranked trial is written to ``log`` (a
    function of one string; the task log through ``print`` in a ``@task``).

    Raises ValueError naming the objective when no trial reported it, and when the arguments do not
    fit (lengths, modes).
    """
    if len(hyperparameters) != len(metrics):
        raise ValueError(
            f"rank_trials: {len(hyperparameters)} hyperparameter sets but {len(metrics)} metrics; pass the "
            "grid the training task was expanded over and that task's output['metrics']"
        )
    for name, how in [("objective", mode), *tie_breakers]:
        if how not in _MODES:
            raise ValueError(f"rank_trials: the mode of {name!r} must be 'max' or 'min', got {how!r}")
    keys = [objective, *(name for name, _ in tie_breakers)]
    trials = []
    for index, (hp, reported) in enumerate(zip(hyperparameters, metrics, strict=True)):
        values = reported or {}
        trials.append({"trial": index, "hyperparameters": dict(hp), **{key: values.get(key) for key in keys}})

    def order(trial: Mapping[str, Any]) -> tuple[Any, ...]:
        key: list[Any] = []
        for name, how in [(objective, mode), *tie_breakers]:
            value = _number(trial[name])
            # Missing after present; "max" sorts the negated value so that every key sorts ascending.
            key.append((value is None, 0.0 if value is None else (-value if how == "max" else value)))
        return (*key, trial["trial"])

    ranked = sorted((t for t in trials if _number(t[objective]) is not None), key=order)
    if not ranked:
        raise ValueError(
            f"no trial reported {objective!r} ({len(trials)} trial(s)): read the training tasks' logs, and "
            "check that the job prints it and that it is among the operator's metrics"
        )
    for place, trial in enumerate(ranked, start=1):
        shown = " ".join(f"{key}={trial[key]}" for key in keys)
        log(f"#{place} trial {trial['trial']} {trial['hyperparameters']}: {shown}")
    return {"best": ranked[0], "ranking": [t["trial"] for t in ranked], "trials": trials}
