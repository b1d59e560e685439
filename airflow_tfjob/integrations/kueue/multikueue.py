"""MultiKueue as a follow part: a job that Kueue's MultiKueue runs on a worker cluster is followed there.

The manager's copy of such a job (``managedBy: kueue.x-k8s.io/multikueue``) has its status mirrored
from the worker but no pods: its replicas, their lines and events live on the worker Kueue chose, which
the job's Workload names (``status.clusterName``). The part reads that name on each change of the job
and hands the follow core a hook of the worker (``Follow.follow_on``), through the Airflow ``kubernetes``
connection the manager's connection maps the worker to, in its extra::

    {"multikueue_connections": {"worker1": "k8s_worker1", "worker2": "k8s_worker2"}}

A job dispatched again to another worker (its first worker lost) is followed there, with a line saying
so. Without a connection for the worker, the task says once which connection to add and follows the
status alone, as before.

Costs a follow nothing but a look at the job's manager (its adapter's ``managed_by``) per change unless
MultiKueue manages the job; such a job has its Workload read on each change (a job changes a few times
in its life), which says where it runs now.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_tfjob.follow.outcome import FollowOutcome
from airflow_tfjob.follow.parts import Follow, FollowPart
from airflow_tfjob.integrations.kueue.workload import newest
from airflow_tfjob.jobs.status import JobStatus

#: Kueue's MultiKueue controller, which the manager's copy of a dispatched job names as its manager.
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
#: The key of the manager connection's extra that maps a worker cluster's name to its connection id.
CONNECTIONS_EXTRA = "multikueue_connections"


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


class WorkerPart(FollowPart):
    """Follows a MultiKueue job's replicas on the worker cluster that runs them."""

    __slots__ = ("cluster", "follow", "told")

    def __init__(self, follow: Follow) -> None:
        self.follow = follow
        self.cluster: str | None = None  # the worker followed now
        self.told: set[str] = set()  # workers whose missing connection the task log named

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
        cluster = str(((workload or {}).get("status") or {}).get("clusterName") or "")
        if not cluster or cluster == self.cluster:
            return None
        connections = connection_map(await f.hook._get_field(CONNECTIONS_EXTRA))
        conn_id = connections.get(cluster)
        if conn_id is None:
            if cluster not in self.told:
                self.told.add(cluster)
                f.sink(f"[multikueue] {f.ref} runs on worker cluster {cluster!r}; its replicas' lines and events "
                       f"are there: add an Airflow kubernetes connection for it and name it in the job "
                       f"connection's extra {CONNECTIONS_EXTRA} ({{{json.dumps(cluster)}: \"<connection id>\"}}); "
                       "following the job's status only")
            return None
        before, self.cluster = self.cluster, cluster
        f.follow_on(type(f.hook)(conn_id=conn_id))
        if before is None:
            f.sink(f"[multikueue] {f.ref} runs on worker cluster {cluster!r}: following its replicas there "
                   f"(connection {conn_id!r})")
        else:
            f.sink(f"[multikueue] {f.ref} was dispatched again, from worker cluster {before!r} to {cluster!r}: "
                   f"following its replicas there (connection {conn_id!r})")
        return None
