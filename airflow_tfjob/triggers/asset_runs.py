"""What ``triggers.assets.KubeflowJobSucceededTrigger`` does when it runs: the body of its ``run``.

Contract: the run module of the asset watchers' trigger, imported at the top of what its run needs, and so
imported only off the triggerer's event loop (by :func:`airflow_tfjob.triggers.loader.load_run_modules`,
which ``run`` awaits first). The trigger's module keeps to declaring: its kwargs' checks and ``serialize``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from airflow.triggers.base import TriggerEvent

from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
from airflow_tfjob.hooks.connection import hook_kwargs
from airflow_tfjob.integrations.assets import (
    emitted,
    event_payload,
    mark,
    subscribe,
    succeeded,
    watcher_id,
)
from airflow_tfjob.integrations.label_selector import LabelSelector
from airflow_tfjob.jobs.kinds import kind_named


class _Watcher(Protocol):
    """What the run reads of its trigger (declared in ``triggers.assets``, which imports this module at
    its entry point only: this module does not import it back); its connection fields are read by name
    (``hooks.connection``)."""

    label_selector: str
    selector: LabelSelector
    namespace: str | None
    kind: str
    metrics: list[str]

    @property
    def log(self) -> Any: ...

    def serialize(self) -> tuple[str, dict[str, Any]]: ...


async def watch(trigger: _Watcher) -> AsyncIterator[TriggerEvent]:
    """An event for each job of the trigger's kind and labels that succeeds, each job once (see
    ``triggers.assets``)."""
    kind = kind_named(trigger.kind)
    hook = AsyncKubeflowJobHook(**hook_kwargs(trigger))
    namespace = trigger.namespace or await hook.get_namespace_async()
    watch_id = watcher_id(trigger.serialize()[1])
    done: set[str] = set()  # this run's events, should a mark be refused
    trigger.log.info(
        "Watching %ss in %s labelled %s: an asset event for each that succeeds (mark %s)",
        kind.kind, namespace, trigger.label_selector, watch_id,
    )  # fmt: skip
    async with subscribe(hook, namespace, kind) as sub:
        while True:
            job = await sub.next()
            meta = job.get("metadata") or {}
            uid = str(meta.get("uid") or "")
            if (
                uid in done
                or not trigger.selector.matches(meta.get("labels"))
                or emitted(job, watch_id)
                or not succeeded(kind, job)
            ):
                continue
            payload = await event_payload(hook, kind, job, trigger.metrics)
            done.add(uid)
            trigger.log.info(
                "%s %s/%s succeeded: asset event with metrics %s%s",
                kind.kind, namespace, meta.get("name"), payload["metrics"],
                f" ({payload['metrics_note']})" if payload["metrics_note"] else "",
            )  # fmt: skip
            yield TriggerEvent(payload)
            await mark(hook, kind, job, watch_id)
