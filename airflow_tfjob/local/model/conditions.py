"""Status conditions, the one write rule every controller of the local cluster follows.

A condition's lastTransitionTime moves only when its status changes; everything else is policy that differs
between the projects the controllers imitate, so it is a parameter here rather than a copy per controller:

- controller-runtime's `meta.SetStatusCondition` (JobSet, Trainer v2, batch Jobs) updates an existing entry
  in place, keeping its position and any field it does not name (`merge=True`), and JobSet's
  `updateCondition` never adds a condition that is not True (`add_false=False`);
- Kueue's `SetStatusCondition` replaces the entry at its position with a fresh one (`observedGeneration`
  through `extra`);
- the training-operator's `setCondition` removes the old entry and appends the new one (`to_end=True`, with
  `lastUpdateTime` through `extra`); its other rules (frozen after Failed, Running/Restarting exclusive)
  stay in controllers/v1/status.py.

The conditions list is always rebuilt from copies, so a caller comparing the status it read with the one it
is about to write sees the change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_tfjob.local.model.resources import JsonDict, now_rfc3339


def find_condition(status: JsonDict, type_: str) -> JsonDict | None:
    """The condition of `type_` in a status: the stored entry itself (entries that are not objects are
    skipped)."""
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def condition_is_true(status: JsonDict, type_: str) -> bool:
    cond = find_condition(status, type_)
    return cond is not None and cond.get("status") == "True"


def set_condition(
    status: JsonDict,
    type_: str,
    value: str,
    reason: str,
    message: str,
    *,
    now: str | None = None,
    extra: Mapping[str, Any] | None = None,
    merge: bool = False,
    to_end: bool = False,
    add_false: bool = True,
) -> bool:
    """Write condition `type_` into `status["conditions"]`; False when nothing was written (a condition
    that is not True, absent, under `add_false=False`).

    `now` defaults to the current time; `extra` fields follow `message` in a new entry (and are updated on a
    merged one)."""
    when = now if now is not None else now_rfc3339()
    conditions = [dict(c) for c in status.get("conditions") or [] if isinstance(c, dict)]
    index = next((i for i, c in enumerate(conditions) if c.get("type") == type_), None)
    if index is None and value != "True" and not add_false:
        return False
    if index is not None and merge:
        current = conditions[index]
        if current.get("status") != value:
            current["lastTransitionTime"] = when
        current.update(status=value, reason=reason, message=message, **(extra or {}))
        status["conditions"] = conditions
        return True
    transition = when
    if index is not None:
        previous = conditions[index]
        if previous.get("status") == value:
            transition = previous.get("lastTransitionTime", when)
    entry: JsonDict = {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        **(extra or {}),
        "lastTransitionTime": transition,
    }
    if index is None:
        conditions.append(entry)
    elif to_end:
        del conditions[index]
        conditions.append(entry)
    else:
        conditions[index] = entry
    status["conditions"] = conditions
    return True
