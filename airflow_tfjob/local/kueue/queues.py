"""The queue side of Kueue's scheduler, pure: which Workloads wait in which ClusterQueue, in what order
(pkg/cache/queue/cluster_queue.go baseCompareFunc), and why a Workload cannot queue at all
(getQueueBlocker). docs/reference/kueue-behaviour.md §3.3, §5.1, §8."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from airflow_tfjob.local.kueue.reasons import MISCONFIGURED, SUSPENDED
from airflow_tfjob.local.kueue.workloads import condition, has_reservation, is_true, priority
from airflow_tfjob.local.model.resources import JsonDict

_NEWEST = 2**62  # a Workload the controller has not seen arrive yet was created last


@dataclass
class Snapshot:
    """Kueue's objects as one cycle of the scheduler sees them."""

    flavors: dict[str, JsonDict] = field(default_factory=dict)
    cluster_queues: dict[str, JsonDict] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], JsonDict] = field(default_factory=dict)
    workloads: list[JsonDict] = field(default_factory=list)
    namespaces: dict[str, JsonDict] = field(default_factory=dict)

    def missing_flavors(self, cq: JsonDict) -> list[str]:
        names = [f.get("name", "") for g in (cq.get("spec") or {}).get("resourceGroups") or []
                 for f in g.get("flavors") or []]
        return sorted({n for n in names if n not in self.flavors})

    def cluster_queue_of(self, wl: JsonDict) -> str | None:
        lq = self.local_queues.get((wl["metadata"].get("namespace", ""), (wl.get("spec") or {}).get("queueName", "")))
        return (lq.get("spec") or {}).get("clusterQueue") if lq else None


def backing_off(wl: JsonDict) -> bool:
    """Evicted for PodsReadyTimeout and requeued, its backoff not over (Requeued=False/PodsReadyTimeout):
    not in the queue yet."""
    requeued = condition(wl, "Requeued")
    return requeued is not None and (requeued.get("status"), requeued.get("reason")) == ("False", "PodsReadyTimeout")


def is_pending(wl: JsonDict) -> bool:
    """A Workload the queue manager holds: not finished, active, no quota reservation, not backing off."""
    return (not is_true(wl, "Finished") and (wl.get("spec") or {}).get("active") is not False
            and not has_reservation(wl) and not wl["metadata"].get("deletionTimestamp") and not backing_off(wl))


def stop_policy(queue: JsonDict | None) -> str:
    """spec.stopPolicy: ``None`` (the default), ``Hold`` or ``HoldAndDrain``."""
    return str(((queue or {}).get("spec") or {}).get("stopPolicy") or "None")


def cq_active(snap: Snapshot, cq: JsonDict) -> bool:
    """The cache's ClusterQueueActive: no missing flavor, not stopped, not terminating."""
    return not (snap.missing_flavors(cq) or stop_policy(cq) != "None" or cq["metadata"].get("deletionTimestamp"))


def blocker(snap: Snapshot, wl: JsonDict) -> tuple[str, str] | None:
    """getQueueBlocker's granular reason and message when the Workload cannot be queued at all
    (``Misconfigured``: the queue is missing; ``Suspended``: it is inactive: a stopped LocalQueue, and a
    stopped ClusterQueue or one missing a flavor, inactive in Kueue's cache). With the default gates of
    Kueue 0.19 the reason written is ``Inadmissible`` (reasons.py)."""
    ns = wl["metadata"].get("namespace", "")
    queue = (wl.get("spec") or {}).get("queueName", "")
    lq = snap.local_queues.get((ns, queue))
    if lq is None:
        return MISCONFIGURED, f"LocalQueue {queue} doesn't exist"
    if stop_policy(lq) != "None":
        return SUSPENDED, f"LocalQueue {queue} is inactive"
    cq_name = (lq.get("spec") or {}).get("clusterQueue", "")
    cq = snap.cluster_queues.get(cq_name)
    if cq is None:
        return MISCONFIGURED, f"ClusterQueue {cq_name} doesn't exist"
    if not cq_active(snap, cq):
        return SUSPENDED, f"ClusterQueue {cq_name} is inactive"
    return None


def drained_by(snap: Snapshot, wl: JsonDict) -> tuple[str, str] | None:
    """reconcileOn{Local,Cluster}QueueActiveState: an admitted Workload whose LocalQueue or ClusterQueue
    has ``stopPolicy: HoldAndDrain`` is evicted (reason, message); ``Hold`` lets it run."""
    ns = wl["metadata"].get("namespace", "")
    lq = snap.local_queues.get((ns, (wl.get("spec") or {}).get("queueName", "")))
    if stop_policy(lq) == "HoldAndDrain":
        return "LocalQueueStopped", "The LocalQueue is stopped"
    cq = snap.cluster_queues.get(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue", ""))
    if stop_policy(cq) == "HoldAndDrain":
        return "ClusterQueueStopped", "The ClusterQueue is stopped"
    return None


def queue_timestamp(wl: JsonDict) -> str:
    """Ordering.GetQueueOrderTimestamp: the creation time, but the eviction time after an eviction for
    PodsReadyTimeout (requeuingStrategy.timestamp: Eviction); a preempted Workload keeps its place."""
    evicted = condition(wl, "Evicted")
    if evicted is not None and (evicted.get("status"), evicted.get("reason")) == ("True", "PodsReadyTimeout"):
        return str(evicted.get("lastTransitionTime", ""))
    return str(wl["metadata"].get("creationTimestamp", ""))


def order_key(wl: JsonDict, arrival: Mapping[str, int]) -> tuple[int, str, int, str]:
    """Higher priority first, then the older queue timestamp; Workloads created within the same second
    in the order they were created (Kueue: by UID), then UID."""
    uid = wl["metadata"].get("uid", "")
    return (-priority(wl), queue_timestamp(wl), arrival.get(uid, _NEWEST), uid)


def pending_in(snap: Snapshot, cq_name: str, sticky: Iterable[str] = (),
               arrival: Mapping[str, int] | None = None) -> list[JsonDict]:
    """The ClusterQueue's pending Workloads in queue order; a preemptor waiting for its victims first."""
    first = set(sticky)
    seen = arrival or {}
    found = [wl for wl in snap.workloads
             if is_pending(wl) and snap.cluster_queue_of(wl) == cq_name and blocker(snap, wl) is None]
    return sorted(found, key=lambda wl: (wl["metadata"].get("uid") not in first, order_key(wl, seen)))


def namespace_matches(cq: JsonDict, namespace: JsonDict | None) -> bool:
    """spec.namespaceSelector: nil selects nothing, {} everything; matchLabels and matchExpressions."""
    selector = (cq.get("spec") or {}).get("namespaceSelector")
    if selector is None:
        return False
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        ok = {"In": labels.get(key) in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}.get(op, False)
        if not ok:
            return False
    return True
