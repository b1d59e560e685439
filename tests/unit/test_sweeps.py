"""rank_trials: the sweep examples' picking task, as the provider's (tests/dags/test_examples.py runs it
in the real sweeps; here every rule on its own)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from airflow_tfjob.integrations.sweeps import rank_trials

GRID = [{"learning_rate": "0.001"}, {"learning_rate": "0.01"}, {"learning_rate": "0.1"}]


def rank(metrics: list[dict[str, Any] | None], **kwargs: Any) -> dict[str, Any]:
    lines: list[str] = []
    result = rank_trials(GRID[: len(metrics)], metrics, "test_accuracy", log=lines.append, **kwargs)
    result["lines"] = lines
    return result


def test_the_highest_objective_wins_and_every_trial_is_kept() -> None:
    result = rank([{"test_accuracy": 0.91, "loss": 0.3}, {"test_accuracy": 0.97}, {"test_accuracy": 0.94}])
    assert result["ranking"] == [1, 2, 0]
    assert result["best"] == {"trial": 1, "hyperparameters": {"learning_rate": "0.01"}, "test_accuracy": 0.97}
    assert [t["test_accuracy"] for t in result["trials"]] == [0.91, 0.97, 0.94]
    assert result["lines"][0] == "#1 trial 1 {'learning_rate': '0.01'}: test_accuracy=0.97"


def test_min_mode_and_tie_breakers_in_order() -> None:
    tied = [
        {"test_accuracy": 0.95, "loss": 0.20},
        {"test_accuracy": 0.95, "loss": 0.10},
        {"test_accuracy": 0.95},  # no loss: last among its equals
    ]
    assert rank(tied, tie_breakers=[("loss", "min")])["ranking"] == [1, 0, 2]
    assert rank(tied)["ranking"] == [0, 1, 2]  # no tie-breaker: trial order
    losses = [{"test_accuracy": 0.3}, {"test_accuracy": 0.1}, {"test_accuracy": 0.2}]
    assert rank(losses, mode="min")["ranking"] == [1, 2, 0]


@pytest.mark.parametrize("missing", [None, {}, {"test_accuracy": math.nan}, {"test_accuracy": "n/a"}])
def test_a_trial_without_a_usable_objective_is_listed_but_not_ranked(missing: Any) -> None:
    result = rank([missing, {"test_accuracy": 0.5}])
    assert result["ranking"] == [1]
    assert len(result["trials"]) == 2 and result["trials"][0]["hyperparameters"] == GRID[0]


def test_no_trial_with_the_objective_names_it() -> None:
    with pytest.raises(ValueError, match=r"no trial reported 'test_accuracy' \(2 trial\(s\)\)"):
        rank([{"loss": 0.1}, None])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "best"}, r"the mode of 'objective' must be 'max' or 'min', got 'best'"),
        ({"tie_breakers": [("loss", "lowest")]}, r"the mode of 'loss' must be 'max' or 'min'"),
    ],
)
def test_a_wrong_mode_is_named(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rank([{"test_accuracy": 0.5}], **kwargs)


def test_the_grid_and_the_metrics_must_pair_up() -> None:
    with pytest.raises(ValueError, match=r"3 hyperparameter sets but 2 metrics"):
        rank_trials(GRID, [{"test_accuracy": 1.0}, None], "test_accuracy")
