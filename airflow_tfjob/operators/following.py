"""Following the task's job: inline on the worker, or handed to the triggerer and drained after.

Both modes run the same async core (:func:`airflow_tfjob.follow.follow_job`): the worker runs it in
its own event loop; a deferred task gives it to :class:`~airflow_tfjob.triggers.tfjob.TFJobTrigger`,
and on resumption :func:`drain` continues from the trigger's cursors so that the result is the
synchronous one. Cheap to import: the async core is imported when a job is followed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tfjob.follow import FollowOptions, FollowOutcome
    from airflow_tfjob.hooks.tfjob import AsyncTFJobHook
    from airflow_tfjob.triggers.tfjob import TFJobTrigger

# Extra time given to Airflow's own trigger timeout beyond the job deadline: the trigger enforces the
# deadline itself (and deletes the job); Airflow's timeout is the backstop for a stuck trigger.
TRIGGER_TIMEOUT_MARGIN = 120.0


def options_for(operator: Any, *, started: float | None) -> FollowOptions:
    """What the follow core needs of the operator's parameters (the same for every kind and API);
    `started`: when the task started, from which ``execution_timeout`` counts (None: no deadline,
    as for the drain after the trigger, which enforced it)."""
    from airflow_tfjob.follow import FollowOptions
    from airflow_tfjob.progress import progress_spec

    progress = progress_spec(operator.progress, operator.hyperparameters)
    timeout = operator.execution_timeout
    return FollowOptions(
        log_replicas=operator.log_replicas,
        startup_timeout=operator.startup_timeout,
        deadline=None if started is None or timeout is None else started + timeout.total_seconds(),
        metrics=list(operator.metrics),
        metrics_history=operator.metrics_history,
        get_logs=operator.get_logs,
        return_marker=operator.return_marker,
        log_rate_per_replica=operator.log_rate_per_replica,
        log_total_cap=operator.log_total_cap,
        kind=operator.job_kind.kind,
        progress=progress.to_dict() if progress is not None else None,
        queue_timeout=operator.queue_timeout,
        on_preemption=operator.on_preemption,
        kueue_require_admission=operator.kueue_require_admission,
        kueue_workload_window=operator.kueue_workload_window,
    )


def follow(
    hook: AsyncTFJobHook,
    name: str,
    namespace: str,
    options: FollowOptions,
    log: Callable[[str], None],
    cursors: dict[str, Any] | None = None,
) -> FollowOutcome:
    """Follow the job to its end on the worker (logs, metrics, status)."""
    from airflow_tfjob.follow import follow_job

    async def run() -> FollowOutcome:
        return await follow_job(hook, name, namespace, options, log, cursors)

    return asyncio.run(run())


def drain(
    hook: AsyncTFJobHook, name: str, namespace: str, options: FollowOptions, log: Any, outcome: FollowOutcome
) -> FollowOutcome:
    """Continue the trigger's follow to the job's end, so that the result is the synchronous one.

    The lines written after the trigger's last cursor, the metrics and return value completed from
    what the trigger collected, and the job's status as it ended (the trigger fired on the first
    terminal status, before the replica counts settled). The outcome stands even if the last lines
    cannot be read.
    """
    from airflow_tfjob.follow import drain_job

    options.startup_timeout = None

    async def run() -> FollowOutcome:
        return await drain_job(hook, name, namespace, options, log.info, outcome)

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
) -> tuple[TFJobTrigger, timedelta | None]:
    """The trigger that follows the job in the triggerer, and Airflow's timeout for it."""
    from airflow_tfjob.triggers.tfjob import TFJobTrigger

    now = time.time()
    timeout = None
    if options.deadline is not None:
        remaining = max(options.deadline - now, 0.0)
        timeout = timedelta(seconds=remaining + TRIGGER_TIMEOUT_MARGIN)
    # Absolute times: a restarted triggerer rebuilds the trigger from these kwargs, and neither
    # the start-up timeout nor the execution deadline may start over with it.
    startup_deadline = None if options.startup_timeout is None else now + options.startup_timeout
    trigger = TFJobTrigger(
        name=name,
        namespace=namespace,
        **connection,
        # The worker's drain continues this follow and reports unseen metrics from the final view.
        options={**asdict(options), "report_missing_metrics": False},
        deadline=options.deadline,
        delete_on_kill=delete_on_kill,
        kill_grace_period=kill_grace_period,
        deferred_at=now,
        startup_deadline=startup_deadline,
    )
    return trigger, timeout
