"""What a trigger asks the triggerer's supervisor (register a secret with its masker, read a task's
state), the same safe way on every Airflow release: on the event loop, through the
channel's own async send, in a task of its own.

Why not the task SDK's blocking calls (``mask_secret``, ``RuntimeTaskInstance.get_task_states``) through
``sync_to_async``: before Airflow 3.2 the triggerer's channel paired each answer with the request read
just before it, under an asyncio lock, and a blocking call made from a thread ran the send on an event
loop of its own, outside that lock; two at once, or one beside the runner's own sends, read each other's
answers and the whole trigger runner died ("Response read out of order", apache/airflow#64620, fixed in
3.2 by apache/airflow#66412). The async send on the runner's loop takes the lock as the runner's sends
do. A send cancelled between its request and its answer would leave the answer for the next send to
read, so each send runs in a task that a cancellation of its caller does not reach.

The connection is still read as the cncf.kubernetes hook reads it (``sync_to_async``, once per
connection and minute for all of a triggerer's jobs: ``hooks.aio.shared_hook``); on 3.0 and 3.1 that
read is a send from a thread too (docs/support-matrix.md says so).

Imported off the event loop (:data:`airflow_tfjob.triggers.loader.RUN_MODULES`): the release's masker
is found at import.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

from airflow.sdk.execution_time import task_runner
from airflow.sdk.execution_time.comms import GetTaskStates, MaskSecret


def _local_masker() -> Any:
    """This process's secrets masker, where the running release keeps it (3.1+: the shared package;
    3.0: the task SDK's execution package)."""
    for module in ("airflow.sdk._shared.secrets_masker", "airflow.sdk.execution_time.secrets_masker"):
        try:
            return importlib.import_module(module)._secrets_masker
        except (ImportError, AttributeError):
            continue
    raise ImportError("no secrets masker in this Airflow release's task SDK")


_MASKER = _local_masker()
#: Sends in flight, referenced until they finish (a task nobody references may be collected).
_SENDS: set[asyncio.Task[Any]] = set()


async def send(message: Any) -> Any:
    """``message`` to the supervisor and its answer; None outside a triggerer (no channel)."""
    comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    if comms is None:
        return None
    sending = asyncio.ensure_future(comms.asend(message))
    _SENDS.add(sending)
    sending.add_done_callback(_SENDS.discard)
    return await asyncio.shield(sending)


async def mask(value: str) -> None:
    """Mask ``value`` in this process's log lines and in the supervisor's (which writes the files)."""
    _MASKER().add_mask(value, None)
    await send(MaskSecret(value=value, name=None))


async def task_state(ti: Any) -> str | None:
    """The state of the task instance ``ti`` (a trigger's ``task_instance``) as the API server has it;
    None when the answer does not name it."""
    map_index = getattr(ti, "map_index", -1)
    map_index = -1 if map_index is None else int(map_index)
    answer = await send(
        GetTaskStates(dag_id=ti.dag_id, task_ids=[ti.task_id], run_ids=[ti.run_id], map_index=map_index)
    )
    states = getattr(answer, "task_states", None) or {}
    # The answer keys a mapped instance as "<task_id>_<map_index>".
    key = f"{ti.task_id}_{map_index}" if map_index >= 0 else ti.task_id
    state = (states.get(ti.run_id) or {}).get(key)
    return None if state is None else str(getattr(state, "value", state))


__all__ = ["mask", "send", "task_state"]
