"""Ranking the trials of a hyperparameter sweep: one mapped training task per trial, then one task that
picks the best from what each trial reported (pure; cheap to import in a DAG file).

A sweep maps the operator over its trials' hyperparameters and reads every trial's final metrics back
from the mapped task's ``metrics`` XCom::

    train = TFJobOperator.partial(task_id="train", ...).expand(hyperparameters=grid)

    @task
    def pick_best(hyperparameters, metrics):
        return rank_trials(hyperparameters, metrics, "test_accuracy", tie_breakers=[("loss", "min")])

    pick_best(grid, train.output["metrics"])

With ``costs=train.output["cost"]`` (each trial's ``cost`` XCom, operators/outcome.report_cost) every
trial carries what its job held and the ranking shows its GPU-hours (and CPU core-hours) beside it, so
the pick can weigh the objective against what each trial cost.

A trial that reported no objective (its job printed none, or its metrics are None) is listed but not
ranked; NaN and infinity do not win either (listed, not ranked).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["RankTrialsError", "rank_trials"]


class RankTrialsError(ValueError):
    """rank_trials' arguments do not describe a sweep: names the argument and the fix."""


_MODES = ("max", "min")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None  # NaN and infinity never win: listed, not ranked


_TIE_FIX = "pass tie_breakers=[('loss', 'min'), ...]: a list of (metric name, 'max' or 'min') pairs"
_METRICS_FIX = "pass the training task's output['metrics'] (one dict of metrics, or None, per trial, in the grid's order)"
_COSTS_FIX = "pass the training task's output['cost'] (one dict, or None, per trial, in the grid's order)"
_GRID_FIX = (
    "pass the grid the training task was expanded over: a list of one dict of hyperparameters per trial"
)


def _refuse(argument: str, problem: str, fix: str) -> RankTrialsError:
    return RankTrialsError(f"rank_trials: {argument}: {problem}. Fix: {fix}")


def _checked(
    hyperparameters: Any, metrics: Any, objective: Any, mode: Any, tie_breakers: Any, log: Any
) -> list[tuple[str, str]]:
    """Refuse arguments that describe no sweep, naming the argument and the fix; the tie-breakers as pairs."""
    if not isinstance(objective, str) or not objective:
        raise _refuse(
            "objective", f"{objective!r} is not a metric name", "name the metric to rank by, e.g. 'accuracy'"
        )
    if mode not in _MODES:
        raise _refuse(
            "mode", f"the mode of 'objective' must be 'max' or 'min', got {mode!r}", "use 'max' or 'min'"
        )
    if isinstance(hyperparameters, (str, bytes)) or not isinstance(hyperparameters, Sequence):
        raise _refuse("hyperparameters", f"is a {type(hyperparameters).__name__}, not a list", _GRID_FIX)
    for i, hp in enumerate(hyperparameters):
        if not isinstance(hp, Mapping):
            raise _refuse(f"hyperparameters[{i}]", f"is a {type(hp).__name__}, not a dict", _GRID_FIX)
    if isinstance(metrics, (str, bytes)) or not isinstance(metrics, Sequence):
        raise _refuse("metrics", f"is a {type(metrics).__name__}, not a list", _METRICS_FIX)
    for i, reported in enumerate(metrics):
        if reported is not None and not isinstance(reported, Mapping):
            raise _refuse(
                f"metrics[{i}]", f"is a {type(reported).__name__}, not a dict or None", _METRICS_FIX
            )
    if len(hyperparameters) != len(metrics):
        raise _refuse(
            "metrics",
            f"{len(hyperparameters)} hyperparameter sets but {len(metrics)} metrics",
            _METRICS_FIX,
        )
    if isinstance(tie_breakers, (str, bytes)) or not isinstance(tie_breakers, Sequence):
        raise _refuse("tie_breakers", f"is a {type(tie_breakers).__name__}, not a list of pairs", _TIE_FIX)
    pairs = []
    for i, pair in enumerate(tie_breakers):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise _refuse(f"tie_breakers[{i}]", f"{pair!r} is not a (metric, mode) pair", _TIE_FIX)
        name, how = pair
        if not isinstance(name, str) or not name:
            raise _refuse(f"tie_breakers[{i}]", f"{name!r} is not a metric name", _TIE_FIX)
        if how not in _MODES:
            raise _refuse(
                f"tie_breakers[{i}]",
                f"the mode of {name!r} must be 'max' or 'min', got {how!r}",
                "use 'max' or 'min'",
            )
        pairs.append((name, how))
    if not callable(log):
        raise _refuse("log", f"{log!r} is not callable", "pass a function of one string, e.g. print")
    return pairs


def _check_costs(costs: Any, trials: int) -> None:
    if costs is None:
        return
    if isinstance(costs, (str, bytes)) or not isinstance(costs, Sequence):
        raise _refuse("costs", f"is a {type(costs).__name__}, not a list", _COSTS_FIX)
    if len(costs) != trials:
        raise _refuse("costs", f"{trials} trials but {len(costs)} costs", _COSTS_FIX)
    for i, cost in enumerate(costs):
        if cost is not None and not isinstance(cost, Mapping):
            raise _refuse(f"costs[{i}]", f"is a {type(cost).__name__}, not a dict or None", _COSTS_FIX)


def _cost_shown(cost: Any) -> str:
    """``gpu_hours=0.25 cpu_core_hours=1.5`` (cost unknown: the trial's task reported none)."""
    if not isinstance(cost, Mapping):
        return "cost unknown"
    return f"gpu_hours={cost.get('gpu_hours')} cpu_core_hours={cost.get('cpu_core_hours')}"


def rank_trials(
    hyperparameters: Sequence[Mapping[str, Any]],
    metrics: Sequence[Mapping[str, Any] | None],
    objective: str,
    *,
    mode: str = "max",
    tie_breakers: Sequence[tuple[str, str]] = (),
    log: Any = print,
    costs: Sequence[Mapping[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """The sweep's trials ranked by ``objective`` (``mode`` "max" or "min"), ties broken by the
    ``(metric, mode)`` pairs of ``tie_breakers`` in order (a trial without a tie-breaker comes last
    among its equals), then by trial number.

    Returns ``{"best": <trial>, "ranking": [trial numbers, best first], "trials": [every trial]}``,
    a trial being ``{"trial": i, "hyperparameters": {...}, <objective>: value, <tie-breaker>: value}``
    with the values as reported (None when absent). Each ranked trial is written to ``log`` (a
    function of one string; the task log through ``print`` in a ``@task``). With ``costs`` (the
    training task's ``cost`` XCom per trial) each trial has a ``"cost"`` too and its line ends with its
    GPU-hours and CPU core-hours.

    Raises RankTrialsError (a ValueError) naming the argument and the fix when the arguments describe
    no sweep (types, lengths, modes), and naming the objective when no trial reported a finite value.
    """
    tie_breakers = _checked(hyperparameters, metrics, objective, mode, tie_breakers, log)
    _check_costs(costs, len(metrics))
    keys = [objective, *(name for name, _ in tie_breakers)]
    trials = []
    for index, (hp, reported) in enumerate(zip(hyperparameters, metrics, strict=True)):
        values = reported or {}
        trials.append({"trial": index, "hyperparameters": dict(hp), **{key: values.get(key) for key in keys}})
        if costs is not None:
            cost = costs[index]
            trials[-1]["cost"] = dict(cost) if cost is not None else None

    def order(trial: Mapping[str, Any]) -> tuple[Any, ...]:
        key: list[Any] = []
        for name, how in [(objective, mode), *tie_breakers]:
            value = _number(trial[name])
            # Missing after present; "max" sorts the negated value so that every key sorts ascending.
            key.append((value is None, 0.0 if value is None else (-value if how == "max" else value)))
        return (*key, trial["trial"])

    ranked = sorted((t for t in trials if _number(t[objective]) is not None), key=order)
    if not ranked:
        raise _refuse(
            objective,
            f"no trial reported {objective!r} ({len(trials)} trial(s)) as a finite number (NaN and infinity are "
            "listed, not ranked)",
            "read the training tasks' logs, and check that the job prints it and that it is among the "
            "operator's metrics",
        )
    for place, trial in enumerate(ranked, start=1):
        shown = " ".join(f"{key}={trial[key]}" for key in keys)
        if costs is not None:
            shown += " " + _cost_shown(trial["cost"])
        log(f"#{place} trial {trial['trial']} {trial['hyperparameters']}: {shown}")
    return {"best": ranked[0], "ranking": [t["trial"] for t in ranked], "trials": trials}
