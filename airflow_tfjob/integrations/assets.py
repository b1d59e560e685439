"""Asset events from training jobs, whoever created them: the shared stream, the selection, the metrics and
the mark that makes each job count once (what ``triggers.assets.KubeflowJobSucceededTrigger`` runs).

- **One stream per (cluster, namespace, kind, event loop)**: a LIST, then a WATCH from the list's
  resourceVersion, of every job of the kind in the namespace (``hooks.watching.ListWatch`` under its
  reconnect-forever layer: resume after a normal end, relist on 410, retry transport errors, raise what
  no retry cures). Every watcher of that namespace and kind shares it, whatever its label selector,
  and first gets every job the stream holds, then each change: a watcher that starts after the stream
  (or again after a restart) still sees the jobs that succeeded while it was away. Values are coalesced
  per job (the newest object wins), so a watcher busy reading a log never holds the stream up.
  ``hooks/jobwatch.py``'s shared watch subscribes by job name, and Airflow's own ``shared_stream_key``
  hands a late subscriber only what comes after it joined (not the LIST it missed): neither serves a
  watcher that must see every job of a namespace.
- **The selection**: a Kubernetes label selector (``team=vision,stage in (prod,staging),!draft``),
  parsed once (:class:`~airflow_tfjob.integrations.label_selector.LabelSelector`, the API server's syntax) and matched here, so that one stream
  serves many selectors.
- **Once per job**: after its event, a job gets the annotation ``tfjob.airflow.apache.org/asset-event-<id>``
  (the time), ``<id>`` naming the watcher (a digest of its trigger's kwargs: what Airflow treats as one
  trigger). A job that carries it is not emitted again by that watcher, after a triggerer restart too; a
  job that succeeded while no triggerer ran is still in the LIST, unmarked, and is emitted once. The
  mark is a merge patch through the hooks (``patch`` on the kind, in the shipped RBAC Role).
- **Metrics**: the rank-0 replica's log (the pod labelled ``job-role=master``, else the adapter's rank 0),
  its last :data:`LOG_TAIL_LINES` lines parsed for the metrics named, in Katib's StdOut format
  (``follow.metrics``), off the event loop; the metrics the job's own status reports (Trainer v2) are
  the starting point. A job whose pods were cleaned up, or whose log cannot be read, still gives its
  event: ``metrics_note`` says why its metrics are missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Hashable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_tfjob.constants import ANNOTATION_PREFIX, LABEL_MANAGED, MULTIKUEUE_MANAGED_BY
from airflow_tfjob.follow.logs_parsing import is_master_role, main_container, replica_name
from airflow_tfjob.follow.metrics import MetricsCollector
from airflow_tfjob.hooks.waits import shared_task
from airflow_tfjob.hooks.watching import ListWatch, as_watch_error, is_permanent
from airflow_tfjob.integrations.kueue.multikueue import CONNECTIONS_EXTRA, worker_hook
from airflow_tfjob.jobs.adapter import adapter_for, pod_replica
from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.jobs.status import JobState

if TYPE_CHECKING:
    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook

log = logging.getLogger(__name__)

#: The annotation a watcher marks an emitted job with: this prefix, then the watcher's id.
ANNOTATION_ASSET_EVENT = ANNOTATION_PREFIX + "asset-event-"
#: Lines of the rank-0 replica's log read for metrics (the newest; a metric's last value wins).
LOG_TAIL_LINES = 5000
#: Server-side timeout of each WATCH request (the stream resumes at once after it).
WATCH_TIMEOUT = 300


# -- the selection ---------------------------------------------------------------------------------


def watcher_id(kwargs: Mapping[str, Any]) -> str:
    """A stable id of a watcher from its trigger's kwargs (Airflow runs one trigger per equal kwargs)."""
    text = json.dumps(kwargs, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def emitted(job: Mapping[str, Any], watch_id: str) -> bool:
    """Whether the job carries this watcher's mark (its event was emitted)."""
    return ANNOTATION_ASSET_EVENT + watch_id in ((job.get("metadata") or {}).get("annotations") or {})


def succeeded(kind: JobKind, job: Mapping[str, Any]) -> bool:
    return adapter_for(kind).interpret(job).state is JobState.SUCCEEDED


# -- the shared stream ------------------------------------------------------------------------------


class Subscriber:
    """One watcher's view of a stream: the jobs changed since it last looked, newest object each."""

    def __init__(self) -> None:
        self._pending: dict[str, dict[str, Any]] = {}
        self._changed = asyncio.Event()
        self._error: BaseException | None = None

    def _deliver(self, name: str, obj: dict[str, Any] | None) -> None:
        if obj is None:
            self._pending.pop(name, None)  # deleted: nothing left to emit
            return
        self._pending.pop(name, None)  # moved to the end: the oldest change is read first
        self._pending[name] = obj
        self._changed.set()

    def _fail(self, error: BaseException) -> None:
        self._error = error
        self._changed.set()

    async def next(self) -> dict[str, Any]:
        """The next job that changed (its newest object); raises the stream's permanent error."""
        while not self._pending:
            if self._error is not None:
                raise self._error
            self._changed.clear()
            await self._changed.wait()
        name = next(iter(self._pending))
        return self._pending.pop(name)


class JobStream:
    """The shared LIST+WATCH of one kind's jobs in one namespace, for one event loop (see the module)."""

    def __init__(self, key: Hashable, hook: AsyncKubeflowJobHook, namespace: str, kind: JobKind) -> None:
        self.key = key
        self.hook = hook
        self.namespace = namespace
        self.kind = kind
        self.cache: dict[str, dict[str, Any]] = {}
        self.synced = False
        self.subscribers: set[Subscriber] = set()
        self.lists = 0  # LIST requests (a relist after 410 included): requests do not grow with watchers
        self.task: asyncio.Task[None] | None = None

    def add(self, sub: Subscriber) -> None:
        self.subscribers.add(sub)
        for name, obj in self.cache.items():
            sub._deliver(name, obj)
        if self.task is None:
            self.task = shared_task(self._run(), name=f"asset-watch:{self.kind.plural}:{self.namespace}")

    def remove(self, sub: Subscriber) -> None:
        self.subscribers.discard(sub)
        if not self.subscribers:
            if _STREAMS.get(self.key) is self:
                del _STREAMS[self.key]
            if self.task is not None and not self.task.done():
                self.task.cancel()

    async def _run(self) -> None:
        lw = ListWatch(
            list_objects=self._list,
            stream_events=self._watch,
            on_list=self._on_list,
            on_event=self._on_event,
            resource=f"{self.kind.kind}s in {self.namespace}",
        )
        try:
            await lw.run_forever()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = as_watch_error(exc) if is_permanent(exc) else exc
            if _STREAMS.get(self.key) is self:
                del _STREAMS[self.key]
            for sub in list(self.subscribers):
                sub._fail(error)

    async def _list(self) -> tuple[list[dict], str]:
        self.lists += 1
        items: list[dict]
        items, version = await self.hook.list_objects(self.kind.plural, self.namespace)
        return items, version

    def _watch(self, resource_version: str) -> AsyncIterator[tuple[str, dict]]:
        return self.hook.watch_jobs(
            self.kind, self.namespace, resource_version=resource_version, timeout_seconds=WATCH_TIMEOUT
        )

    def _on_list(self, items: list[dict]) -> None:
        listed = {str((o.get("metadata") or {}).get("name")): o for o in items}
        for name in set(self.cache) - set(listed):
            self._publish(name, None)
        self.cache = listed
        self.synced = True
        for name, obj in listed.items():
            self._publish(name, obj)

    def _on_event(self, etype: str, obj: dict) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if etype == "BOOKMARK" or not name:
            return
        if etype == "DELETED":
            self.cache.pop(name, None)
            self._publish(name, None)
        else:
            self.cache[name] = obj
            self._publish(name, obj)

    def _publish(self, name: str, obj: dict[str, Any] | None) -> None:
        for sub in self.subscribers:
            sub._deliver(name, obj)


_STREAMS: dict[Hashable, JobStream] = {}


@contextlib.asynccontextmanager
async def subscribe(hook: AsyncKubeflowJobHook, namespace: str, kind: JobKind) -> AsyncIterator[Subscriber]:
    """A subscription to the shared stream of ``kind``'s jobs in ``namespace`` (started by the first)."""
    loop = asyncio.get_running_loop()
    key = (await hook.get_cluster_key(), namespace, kind.plural, id(loop))
    stream = _STREAMS.get(key)
    if stream is None:
        stream = _STREAMS[key] = JobStream(key, hook, namespace, kind)
    sub = Subscriber()
    stream.add(sub)
    try:
        yield sub
    finally:
        stream.remove(sub)


def streams() -> list[dict[str, Any]]:
    """The running loop's streams: namespace, kind, watchers and LIST requests (tests, diagnostics)."""
    loop = id(asyncio.get_running_loop())
    return [
        {"namespace": s.namespace, "kind": s.kind.kind, "watchers": len(s.subscribers), "lists": s.lists}
        for key, s in _STREAMS.items()
        if isinstance(key, tuple) and key[-1] == loop
    ]


# -- the event ------------------------------------------------------------------------------------


async def event_payload(
    hook: AsyncKubeflowJobHook, kind: JobKind, job: Mapping[str, Any], metric_names: list[str]
) -> dict[str, Any]:
    """What the asset event's extra carries for a job that succeeded (JSON)."""
    meta = job.get("metadata") or {}
    adapter = adapter_for(kind)
    status = adapter.interpret(job)
    metrics, source, missing, note = await read_metrics(hook, kind, job, metric_names)
    labels = dict(meta.get("labels") or {})
    return {
        "kind": kind.kind,
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "labels": labels,
        # Who submitted it, as far as the job says: this provider labels its jobs; anything else
        # (the Kubeflow SDK, kubectl, another tool) is "other".
        "created_by": "airflow-tfjob" if LABEL_MANAGED in labels else "other",
        "start_time": status.start_time,
        "completion_time": status.completion_time,
        "metrics": metrics,
        "metrics_source": source,
        "metrics_missing": missing,
        "metrics_note": note,
    }


async def read_metrics(
    hook: AsyncKubeflowJobHook, kind: JobKind, job: Mapping[str, Any], names: list[str]
) -> tuple[dict[str, float], str | None, list[str], str | None]:
    """(metrics, the replica whose log gave them, the names not found, why some are missing or None)."""
    meta = job.get("metadata") or {}
    adapter = adapter_for(kind)
    reported = {k: v for k, v in adapter.result_extras(job).metrics.items() if isinstance(v, (int, float))}
    if not names:
        return reported, None, [], None
    unread = [n for n in names if n not in reported]
    pods_hook, worker = hook, ""
    if adapter.managed_by(job) == MULTIKUEUE_MANAGED_BY:
        # Its pods were on the MultiKueue worker that ran it, not here: read there when a connection
        # names that worker (MultiKueue removes the worker's copy, pods and all, once the job finished,
        # so the log is there only for the moments before).
        try:
            worker, on_worker = await worker_hook(hook, job)
        except Exception as error:
            return reported, None, unread, f"the worker cluster that ran it could not be read: {error}"
        if worker and on_worker is None:
            why = f"it ran on worker cluster {worker!r}, which no connection names ({CONNECTIONS_EXTRA} in the connection's extra)"
            return reported, None, unread, f"{why}: its log was not read"
        pods_hook = on_worker or hook  # no Workload names a worker: looked for where the job is
    try:
        pods = await pods_hook.list_job_pods(str(meta.get("name")), meta.get("namespace"), kind=kind)
    except Exception as error:  # the event still goes out, saying why its metrics are missing
        return reported, None, list(names), f"the job's pods could not be listed: {error}"
    rank0 = adapter.rank0(job)
    chosen = next((p for p in pods if is_master_role(p)), None) or next(
        (p for p in pods if rank0 is not None and pod_replica(p) == rank0), None
    )
    if chosen is None:
        if pods:
            why = "no rank-0 replica pod"
        elif worker:
            why = (f"no pod of the job is left on worker cluster {worker!r} (MultiKueue removes the worker's "
                   "copy with its pods once the job finished)")
        else:
            why = "no pod of the job is left (cleaned up after it succeeded)"
        return reported, None, unread, f"{why}: its log was not read"
    ident = pod_replica(chosen)
    replica = replica_name(*ident) if ident is not None else str(chosen["metadata"]["name"])
    try:
        text = await pods_hook.read_pod_log(
            chosen["metadata"]["name"],
            meta.get("namespace"),
            container=main_container(chosen, kind.container),
            tail_lines=LOG_TAIL_LINES,
        )
    except Exception as error:
        return (
            reported,
            None,
            [n for n in names if n not in reported],
            f"the {replica} log could not be read: {error}",
        )
    collector = MetricsCollector(names)
    # Parsing thousands of lines is CPU work: off the triggerer's event loop.
    await asyncio.to_thread(collector.feed_many, text.splitlines())
    found = {k: v for k, v in collector.result().items() if k not in ("missing", "history")}
    metrics = {**reported, **found}
    missing = [n for n in names if n not in metrics]
    note = f"not printed in the last {LOG_TAIL_LINES} lines of the {replica} log" if missing else None
    where = f" on worker cluster {worker}" if worker else ""
    return metrics, f"{replica} log{where}", missing, note


async def mark(hook: AsyncKubeflowJobHook, kind: JobKind, job: Mapping[str, Any], watch_id: str) -> None:
    """Annotate the job as emitted by this watcher; a job already gone needs no mark (it is not listed)."""
    meta = job.get("metadata") or {}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    patch = {"metadata": {"annotations": {ANNOTATION_ASSET_EVENT + watch_id: stamp}}}
    try:
        await hook.patch_job(kind, str(meta.get("name")), meta.get("namespace"), patch)
    except Exception as error:
        if getattr(error, "status", None) == 404:
            return
        log.warning(
            "Could not mark %s %s/%s as emitted (%s): a restarted triggerer may emit it again; the "
            "connection's account needs patch on %s (airflow_tfjob/rbac/role.yaml)",
            kind.kind, meta.get("namespace"), meta.get("name"), error, kind.plural,
        )  # fmt: skip
