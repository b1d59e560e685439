"""MultiKueue as a follow part: a job that Kueue's MultiKueue runs on a worker cluster is followed there.

The manager's copy of such a job (``managedBy: kueue.x-k8s.io/multikueue``) has its status mirrored
from the worker but no pods: its replicas, their lines and events live on the worker Kueue chose, which
the job's Workload names (``status.clusterName``). The part reads that name on each change of the job
and hands the follow core a hook of the worker (``Follow.follow_on``), through the Airflow ``kubernetes``
connection the manager's connection maps the worker to, in its extra::

    {"multikueue_connections": {"worker1": "k8s_worker1", "worker2": "k8s_worker2"}}

or the operator's parameter of the same name (``multikueue_connections={...}``), which wins per
worker: a DAG may point one worker elsewhere without editing a connection others share.

A job dispatched again to another worker (its first worker lost) is followed there, with a line saying
so. Without a connection for the worker, the task says once which connection to add and follows the
status alone, as before.

A worker lost while the job's replicas run there is not left to hang the task: Kueue (v0.19) does not
dispatch such a job again, and the manager's copy keeps its last mirrored status, so the part watches
the worker's MultiKueueCluster and ends the follow once it has been ``Active=False`` for
``WORKER_LOST_WINDOW`` (the ``worker_lost`` event: the operator deletes the manager's copy, the failure
is infrastructure's, ``WorkerLost``). A kill, timeout or failure cleanup then checks through the
worker's connection that the worker's copy went too (:class:`WorkerCopyCheck`).

Costs a follow nothing but a look at the job's manager (its adapter's ``managed_by``) per change unless
MultiKueue manages the job; such a job has its Workload and its worker's MultiKueueCluster read on each
change and every ``WORKER_LOOK`` seconds (a lost worker changes nothing on the manager).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tfjob.constants import MULTIKUEUE_MANAGED_BY, WORKER_LOST
from airflow_tfjob.follow.cleanup import ElsewhereSteps, KillCall
from airflow_tfjob.follow.outcome import FollowOutcome
from airflow_tfjob.follow.parts import Follow, FollowPart
from airflow_tfjob.integrations.kueue.workload import newest
from airflow_tfjob.jobs.adapter import adapter_for
from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.jobs.status import JobStatus, epoch_seconds

if TYPE_CHECKING:
    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook

#: Kueue's MultiKueue controller, which the manager's copy of a dispatched job names as its manager.
MULTIKUEUE = MULTIKUEUE_MANAGED_BY
#: The key of the manager connection's extra that maps a worker cluster's name to its connection id.
CONNECTIONS_EXTRA = "multikueue_connections"
#: Seconds the job's worker may stay lost (its MultiKueueCluster Active=False) before the follow ends:
#: Kueue's default workerLostTimeout (15 min), after which Kueue dispatches again a job it can move,
#: plus 5 min for that dispatch to show; a job still on the lost worker then will not move.
WORKER_LOST_WINDOW = 1200.0
#: Seconds between looks at the worker's MultiKueueCluster while it is reachable (a lost worker
#: changes nothing on the manager, so the part's clock, not a job change, must bring the look).
WORKER_LOOK = 30.0
#: Seconds a kill waits for the worker's copy to go once the manager's is deleted (MultiKueue removes
#: it within a second or two while it reaches the worker), each look retried for as long at most.
WORKER_COPY_WAIT = 20.0


def connection_map(value: Any) -> dict[str, str]:
    """The extra's map (a dict, or its JSON text as a form field holds it); {} when absent or not a map."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items() if v}


@dataclass(frozen=True)
class WorkerOptions:
    """The part's options: the operator's ``multikueue_connections`` (checked by its row's rule), which
    win per worker over the job connection's extra of the same name."""

    multikueue_connections: Mapping[str, str] | None = None


class WorkerPart(FollowPart):
    """Follows a MultiKueue job's replicas on the worker cluster that runs them, and ends the follow when
    that worker stays lost (see ``WORKER_LOST_WINDOW``)."""

    __slots__ = ("cluster", "follow", "lost", "told", "unread", "where")
    options_type = WorkerOptions

    def __init__(self, follow: Follow) -> None:
        self.follow = follow
        self.cluster: str | None = None  # the worker followed now
        self.where: str = ""  # the worker the job's Workload names now (followed or not)
        # The worker's loss as last read: (since, in epoch seconds; the condition's reason and message).
        self.lost: tuple[float, str, str] | None = None
        self.told: set[str] = set()  # workers whose missing connection the task log named
        self.unread: set[str] = set()  # workers whose MultiKueueCluster could not be read (said once)

    @classmethod
    def start(cls, follow: Follow) -> WorkerPart:
        # A drain reads the rest of the lines, which are on the worker too: every follow has the part.
        return cls(follow)

    async def on_job(self, job: Mapping[str, Any], status: JobStatus) -> FollowOutcome | None:
        if self.follow.adapter.managed_by(job) != MULTIKUEUE:
            return None  # run where it is: no Workload to read
        f = self.follow
        uid = str((job.get("metadata") or {}).get("uid") or "")
        workload = newest(await f.hook.list_workloads(f.namespace, uid)) if uid else None
        self.where = str(((workload or {}).get("status") or {}).get("clusterName") or "")
        if self.where and self.where != self.cluster:
            await self._follow_on(self.where)
        return await self._judge_loss(status)

    async def _follow_on(self, cluster: str) -> None:
        f = self.follow
        conn_id = await worker_connection(f, cluster)
        if conn_id is None:
            if cluster not in self.told:
                self.told.add(cluster)
                f.sink(f"[multikueue] {f.ref} runs on worker cluster {cluster!r}; its replicas' lines and events "
                       f"are there: add an Airflow kubernetes connection for it and name it in the job "
                       f"connection's extra {CONNECTIONS_EXTRA} or the operator's parameter of that name "
                       f"({{{json.dumps(cluster)}: \"<connection id>\"}}); following the job's status only")
            return
        before, self.cluster = self.cluster, cluster
        f.follow_on(type(f.hook)(conn_id=conn_id))
        if before is None:
            f.sink(f"[multikueue] {f.ref} runs on worker cluster {cluster!r}: following its replicas there "
                   f"(connection {conn_id!r})")
        else:
            f.sink(f"[multikueue] {f.ref} was dispatched again, from worker cluster {before!r} to {cluster!r}: "
                   f"following its replicas there (connection {conn_id!r})")

    async def _judge_loss(self, status: JobStatus) -> FollowOutcome | None:
        """The end of a follow whose worker has been lost for ``WORKER_LOST_WINDOW`` (None: not yet).

        Kueue v0.19.2 does not dispatch again a job whose replicas were running when its worker went
        (its mirrored status keeps the job active, so it keeps its quota), and nothing on the manager
        changes after: without this clock the task would wait for ever. The clock counts from the
        ``Active`` condition's lastTransitionTime, so a triggerer's restart does not start it over."""
        if not self.where or status.finished:
            self.lost = None
            return None
        mkc = await self.follow.hook.multikueue_cluster(self.where)
        if mkc is None and self.where not in self.unread:
            self.unread.add(self.where)
            self.follow.sink(
                f"[multikueue] cannot read MultiKueueCluster {self.where} (absent, or refused to the connection's "
                "user): a loss of that worker would not end the follow; grant get on "
                "multikueueclusters.kueue.x-k8s.io (cluster-scoped: kubectl apply -f "
                "airflow_tfjob/rbac/multikueue-clusterrole.yaml, its binding's subject the connection's account)")
        active = next((c for c in ((mkc or {}).get("status") or {}).get("conditions") or ()
                       if isinstance(c, Mapping) and c.get("type") == "Active"), None)
        if active is None or active.get("status") != "False":
            self.lost = None
            return None
        since = epoch_seconds(active.get("lastTransitionTime"))
        if since is None:
            since = self.lost[0] if self.lost is not None else time.time()
        self.lost = (since, str(active.get("reason") or ""), str(active.get("message") or ""))
        if time.time() - since < WORKER_LOST_WINDOW:
            return None
        reason = ": ".join(part for part in self.lost[1:] if part)
        return FollowOutcome(
            WORKER_LOST,
            status,
            f"worker cluster {self.where} lost (MultiKueueCluster {self.where} Active=False: {reason}) while "
            f"{self.follow.ref} ran; for {WORKER_LOST_WINDOW:g} s Kueue did not dispatch it again (it does "
            "not move a job whose replicas were running) and its replicas cannot be reached. The manager's "
            "copy is deleted (MultiKueue removes the worker's when the worker is back); run the task again "
            "once the worker is reachable, or with the worker taken out of the MultiKueueConfig",
        )

    def wake_in(self) -> float | None:
        """How soon to look at the worker again without a job change (a lost worker changes nothing)."""
        if not self.where:
            return None
        if self.lost is None:
            return WORKER_LOOK
        return max(0.05, min(WORKER_LOOK, self.lost[0] + WORKER_LOST_WINDOW - time.time()))

    def waiting_for(self) -> str | None:
        if self.lost is None:
            return None
        return f"its worker cluster {self.where} was lost ({self.lost[1] or 'Active=False'})"


async def worker_connection(follow: Follow, cluster: str) -> str | None:
    """The connection id of worker ``cluster``: the operator's map first, then the job connection's
    extra (read only when the parameter does not name the worker; the hook reads the connection with
    Airflow's async getter, off the triggerer's loop)."""
    given = connection_map(follow.options.read(WorkerOptions).multikueue_connections)
    if cluster in given:
        return given[cluster]
    return connection_map(await follow.hook.connection_extra(CONNECTIONS_EXTRA)).get(cluster)


async def worker_hook(hook: AsyncKubeflowJobHook, job: Mapping[str, Any]) -> tuple[str, AsyncKubeflowJobHook | None]:
    """Where a job MultiKueue manages runs or ran: the worker its newest Workload names
    (``status.clusterName``; '' when none does: not dispatched, or no Workload left) and a hook of that
    worker through the connection the job connection's extra maps it to (None without one). For readers
    outside a follow (the asset watcher), which have no operator parameter to consult."""
    meta = job.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    workload = newest(await hook.list_workloads(str(meta.get("namespace") or "") or None, uid)) if uid else None
    cluster = str(((workload or {}).get("status") or {}).get("clusterName") or "")
    if not cluster:
        return "", None
    conn_id = connection_map(await hook.connection_extra(CONNECTIONS_EXTRA)).get(cluster)
    return cluster, (type(hook)(conn_id=conn_id) if conn_id else None)


class WorkerCopyCheck:
    """A kill's look at the worker (cleanup.KillElsewhere): deleting the manager's copy of a MultiKueue
    job has MultiKueue remove the worker's, which the task cannot see from the manager. Before the
    deletion it reads where the job runs (the Workload goes with the job); after, it checks through
    the worker's connection that the worker's copy is gone within ``WORKER_COPY_WAIT`` seconds, and
    warns naming the object and what to do if not (or if it cannot look). Never fails the kill: the
    manager's deletion is what the task owns."""

    def __init__(self, given: Mapping[str, str] | None, warn: Callable[[str], None],
                 info: Callable[[str], None]) -> None:
        self.given = connection_map(given)
        self.warn = warn
        self.info = info
        self.worker: tuple[str, str | None] | None = None  # (cluster, connection id) of the job's copy

    def before(self, kind: JobKind, name: str, namespace: str) -> ElsewhereSteps:
        job = yield KillCall("find_job", (kind, name, namespace), tolerant=True)
        if not isinstance(job, Mapping) or adapter_for(kind).managed_by(job) != MULTIKUEUE:
            return
        uid = str((job.get("metadata") or {}).get("uid") or "")
        workloads = yield KillCall("list_workloads", (namespace, uid), tolerant=True)
        workload = newest(workloads) if isinstance(workloads, list) else None
        cluster = str(((workload or {}).get("status") or {}).get("clusterName") or "")
        if not cluster:
            return  # not dispatched: no copy on any worker to look for
        conn_id = self.given.get(cluster)
        if conn_id is None:
            extra = yield KillCall("connection_extra", (CONNECTIONS_EXTRA,), tolerant=True)
            conn_id = None if isinstance(extra, BaseException) else connection_map(extra).get(cluster)
        self.worker = (cluster, conn_id)

    def after(self, kind: JobKind, name: str, namespace: str) -> ElsewhereSteps:
        if self.worker is None:
            return
        cluster, conn_id = self.worker
        ref = f"{kind.kind} {namespace}/{name} on worker cluster {cluster!r}"
        by_hand = f"delete it there (kubectl --context <{cluster}> delete {kind.plural} -n {namespace} {name})"
        if conn_id is None:
            self.warn(f"[multikueue] {ref} was not checked: no connection names that worker "
                      f"({CONNECTIONS_EXTRA}); MultiKueue removes it while it reaches the worker, else {by_hand}")
            return
        deadline = time.monotonic() + WORKER_COPY_WAIT
        while True:
            left = deadline - time.monotonic()
            found = yield KillCall("find_job", (kind, name, namespace), conn_id=conn_id,
                                   retry_timeout=max(1.0, left), tolerant=True)
            if found is None:
                self.info(f"[multikueue] {ref} is gone too (checked through connection {conn_id!r})")
                return
            if isinstance(found, BaseException):
                status = getattr(found, "status", None)
                why = f"the worker answered {status}" if status else "the worker did not answer"
                self.warn(f"[multikueue] {ref} could not be checked through connection {conn_id!r} ({why}); "
                          f"MultiKueue removes it once it reaches the worker again, else {by_hand}")
                return
            if time.monotonic() >= deadline:
                self.warn(f"[multikueue] {ref} still exists {WORKER_COPY_WAIT:g} s after the manager's copy was "
                          f"deleted; MultiKueue may not reach the worker: {by_hand}")
                return
            yield 0.5
