"""Following the task's job: inline on the worker, or handed to the triggerer and drained after.

Both modes run the same async core (:func:`airflow_tfjob.follow.core.follow_job`): the worker runs it in
its own event loop; a deferred task gives it to :class:`~airflow_tfjob.triggers.deferral.KubeflowJobTrigger`,
and on resumption :func:`drain` continues from the trigger's cursors so that the result is the
synchronous one. A run module (operators/runs.py's, and the operator's get_async_hook at its entry), as
its name says: what a DAG file's parse imports does not import it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from airflow_tfjob.constants import TRIGGER_TIMEOUT_MARGIN
from airflow_tfjob.follow.core import drain_job, follow_job
from airflow_tfjob.follow.outcome import FollowOptions, FollowOutcome
from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
from airflow_tfjob.hooks.connection import hook_kwargs
from airflow_tfjob.integrations import parts as registry
from airflow_tfjob.operators import params
from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

__all__ = ["TRIGGER_TIMEOUT_MARGIN", "async_hook", "drain", "follow", "options_for", "trigger_for"]


def async_hook(operator: Any) -> AsyncKubeflowJobHook:
    """The body of the operator's ``get_async_hook``: the follow's client (aiohttp), with the connection read."""
    return AsyncKubeflowJobHook(**hook_kwargs(operator)).with_connection_read()


def options_for(operator: Any, checked: Mapping[str, Any], *, started: float | None) -> FollowOptions:
    """The task's follow options, built once per task (the inline follow, or the trigger and the
    drain after it, read the same): the operator's follow parameters as their rules ``checked``
    them (the rows of its parameter table say which, under which field), with the kind of the job,
    the return marker, and the deadline of ``execution_timeout`` from ``started`` (None: none).
    """
    timeout = operator.execution_timeout
    return FollowOptions.of(
        **params.follow_options(operator.parameter_table, checked, operator),
        deadline=None if started is None or timeout is None else started + timeout.total_seconds(),
        return_marker=operator.return_marker,
        kind=operator.job_kind.kind,
    )


def follow(
    hook: AsyncKubeflowJobHook,
    name: str,
    namespace: str,
    options: FollowOptions,
    log: Callable[[str], None],
    cursors: dict[str, Any] | None = None,
) -> FollowOutcome:
    """Follow the job to its end on the worker (logs, metrics, status)."""
    async def run() -> FollowOutcome:
        return await follow_job(hook, name, namespace, options, log, cursors, parts=registry.PARTS)  # the registry as it is now

    return asyncio.run(run())


def drain(
    hook: AsyncKubeflowJobHook,
    name: str,
    namespace: str,
    options: FollowOptions,
    log: Any,
    outcome: FollowOutcome,
) -> FollowOutcome:
    """Continue the trigger's follow to the job's end, so that the result is the synchronous one.

    The lines written after the trigger's last cursor, the metrics and return value completed from
    what the trigger collected, and the job's status as it ended (the trigger fired on the first
    terminal status, before the replica counts settled). The outcome stands even if the last lines
    cannot be read.
    """
    async def run() -> FollowOutcome:
        return await drain_job(hook, name, namespace, options.for_drain(), log.info, outcome, parts=registry.PARTS)

    try:
        return asyncio.run(run())
    except Exception as error:
        log.warning("Could not drain the last log lines of %s/%s: %s", namespace, name, error)
        return outcome


def trigger_for(
    name: str,
    namespace: str,
    options: FollowOptions,
    connection: Mapping[str, Any],
    *,
    delete_on_kill: bool,
    kill_grace_period: int | None,
) -> tuple[KubeflowJobTrigger, timedelta | None]:
    """The trigger that follows the job in the triggerer, and Airflow's timeout for it."""
    now = time.time()
    timeout = None
    if options.deadline is not None:
        remaining = max(options.deadline - now, 0.0)
        timeout = timedelta(seconds=remaining + TRIGGER_TIMEOUT_MARGIN)
    trigger = KubeflowJobTrigger(
        name=name,
        namespace=namespace,
        **connection,
        # Everything the follow needs travels once, in the options (the deadline with them); the
        # worker's drain continues this follow and reports unseen metrics from the final view.
        options=options.with_parts(report_missing_metrics=False).to_dict(),
        delete_on_kill=delete_on_kill,
        kill_grace_period=kill_grace_period,
        # This deferral's identity, and when its start-up clock started: a restarted triggerer
        # rebuilds the trigger from these kwargs, and the clock must not start over with it.
        deferred_at=now,
    )
    return trigger, timeout
