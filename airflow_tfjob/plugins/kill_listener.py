"""The provider's Airflow plugin: a listener that stops the job of a deferred task a user marks
failed or success before any triggerer has started its trigger.

Airflow 3.3 runs nothing of the task when a user sets a deferred task's state: the trigger's
``on_kill`` runs only if a triggerer is already running that trigger. Marked in the window between
the task deferring and a triggerer picking the trigger up (a second or two, longer with a busy or
stopped triggerer), the trigger row is deleted unread and the job would train on with nobody
following it. The API server does call listeners when a user sets a state (``previous_state`` None,
the task instance still pointing at its trigger), so this listener rebuilds the trigger from its
row and runs the trigger's own ``on_kill``: the same deletion, through
:func:`airflow_tfjob.follow.cleanup.kill_async`, with the grace period and ``on_kill_action`` the task
deferred with. When the triggerer had started the trigger too, both delete; a second deletion of a
job already going finds nothing left to do.

Registered through the ``airflow.plugins`` entry point (pyproject.toml), which Airflow reads in
every component; only the API server calls these two hooks with ``previous_state`` None.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from airflow_tfjob.triggers.deferral import KubeflowJobTrigger
from airflow_tfjob.version_compat import AIRFLOW_V_3_2_PLUS

# Where the running release expects them: the task SDK's from 3.2, the core's before (common.compat's
# sdk module has them too, but not in the 1.7 that Airflow 3.0.6's constraints pin).
if AIRFLOW_V_3_2_PLUS:
    from airflow.sdk.plugins_manager import AirflowPlugin
else:
    from airflow.plugins_manager import AirflowPlugin  # type: ignore[no-redef,assignment]
try:
    from airflow.sdk._shared.listeners import hookimpl
except ImportError:  # before 3.3 the marker lives in the core; both mark the same pluggy project
    from airflow.listeners import hookimpl  # type: ignore[no-redef]

log = logging.getLogger(__name__)

#: The trigger classes whose ``on_kill`` stops a job the task owns (the sensors' triggers own none).
_OWNING_TRIGGERS = ("airflow_tfjob.triggers.deferral.KubeflowJobTrigger",)


def kill_unstarted_trigger(previous_state: Any, task_instance: Any) -> threading.Thread | None:
    """Start deleting the job of ``task_instance`` if a user just set the state of it while it was
    deferred on one of our triggers; returns the thread doing it (None: nothing to do).

    The deletion runs in a thread of its own so that the user's request returns at once; it logs
    in the API server's log.
    """
    if previous_state is not None or getattr(task_instance, "trigger_id", None) is None:
        return None  # not a user's state change of a deferred task
    row = getattr(task_instance, "trigger", None)
    if row is None or row.classpath not in _OWNING_TRIGGERS:
        return None

    trigger = KubeflowJobTrigger(**row.kwargs)
    log.info(
        "%s marked %s while deferred: deleting %s %s/%s",
        getattr(task_instance, "task_id", "?"),
        getattr(task_instance, "state", "?"),
        trigger.kind.kind,
        trigger.namespace,
        trigger.name,
    )
    thread = threading.Thread(target=_run, args=(trigger,), name=f"tfjob-kill-{trigger.name}", daemon=True)
    thread.start()
    return thread


def _run(trigger: Any) -> None:
    try:
        asyncio.run(trigger.on_kill())
    except Exception:
        log.exception("Could not delete %s/%s", trigger.namespace, trigger.name)


class _Listener:
    """The hooks (pluggy finds them on this object); errors are logged by Airflow, never raised."""

    @hookimpl
    def on_task_instance_failed(self, previous_state: Any, task_instance: Any, error: Any) -> None:
        kill_unstarted_trigger(previous_state, task_instance)

    @hookimpl
    def on_task_instance_success(self, previous_state: Any, task_instance: Any) -> None:
        kill_unstarted_trigger(previous_state, task_instance)


class KubeflowJobPlugin(AirflowPlugin):
    name = "airflow_tfjob"
    listeners = [_Listener()]
