"""The one condition write rule (model/conditions.py) under each controller's policy."""

from __future__ import annotations

from airflow_tfjob.local.model.conditions import condition_is_true, find_condition, set_condition
from airflow_tfjob.local.model.resources import JsonDict

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def _status() -> JsonDict:
    return {
        "conditions": [
            {
                "type": "A",
                "status": "True",
                "reason": "r",
                "message": "m",
                "lastTransitionTime": T0,
                "owner": "x",
            },
            {"type": "B", "status": "False", "reason": "r", "message": "m", "lastTransitionTime": T0},
        ]
    }


def test_transition_time_moves_only_with_the_status_in_every_mode() -> None:
    for mode in ({"merge": True}, {}, {"to_end": True}):
        status = _status()
        set_condition(status, "A", "True", "r2", "m2", now=T1, **mode)
        assert (find_condition(status, "A") or {}).get("lastTransitionTime") == T0, mode
        set_condition(status, "A", "False", "r3", "m3", now=T1, **mode)
        assert (find_condition(status, "A") or {}).get("lastTransitionTime") == T1, mode


def test_merge_keeps_the_entry_its_fields_and_place() -> None:
    status = _status()
    set_condition(status, "A", "False", "r2", "m2", now=T1, merge=True)
    assert status["conditions"][0] == {
        "type": "A",
        "status": "False",
        "reason": "r2",
        "message": "m2",
        "lastTransitionTime": T1,
        "owner": "x",
    }


def test_replace_drops_unnamed_fields_and_to_end_moves_the_entry_last() -> None:
    status = _status()
    set_condition(status, "A", "True", "r", "m", now=T1, extra={"observedGeneration": 2})
    assert status["conditions"][0] == {
        "type": "A",
        "status": "True",
        "reason": "r",
        "message": "m",
        "observedGeneration": 2,
        "lastTransitionTime": T0,
    }
    set_condition(status, "A", "True", "r", "m", now=T1, to_end=True)
    assert [c["type"] for c in status["conditions"]] == ["B", "A"]


def test_add_false_false_updates_but_never_adds_a_false_condition() -> None:
    status = _status()
    assert not set_condition(status, "C", "False", "r", "m", now=T1, add_false=False)
    assert find_condition(status, "C") is None
    assert set_condition(status, "B", "True", "r", "m", now=T1, add_false=False)
    assert condition_is_true(status, "B")
    assert set_condition(status, "C", "True", "r", "m", now=T1, add_false=False)
    assert condition_is_true(status, "C")


def test_the_stored_entries_are_never_edited_in_place() -> None:
    status = _status()
    before = status["conditions"]
    first = dict(before[0])
    set_condition(status, "A", "False", "r2", "m2", now=T1, merge=True)
    assert before[0] == first and status["conditions"] is not before
