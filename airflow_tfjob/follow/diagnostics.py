"""Why a replica failed, told without kubectl: exit code, reason, last log lines, warning events.

Works from what the follow core last saw of each pod (its watch cache keeps pods that cleanup has
already deleted) and from the per-replica ring buffers of the log streams, so a job whose pods are gone
(cleanPodPolicy All, or operators up to v1.9.3 deleting pods on deadline/backoff failures) is still
explained. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_tfjob.constants import CONTAINER_NAME
from airflow_tfjob.follow.logs_parsing import container_status, main_container, pod_replica, replica_name

# Waiting reasons that mean the container will not start by itself.
WAITING_FAILURES = (
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
)
# Pod-level reasons set by the kubelet or the eviction manager.
POD_FAILURES = ("Evicted", "DeadlineExceeded", "OutOfcpu", "OutOfmemory", "NodeLost", "Shutdown")

_SIGNALS = {130: "SIGINT", 134: "SIGABRT", 137: "SIGKILL", 139: "SIGSEGV", 143: "SIGTERM"}


@dataclass
class ReplicaDiagnosis:
    replica: str  # "worker-1"
    pod: str
    reason: str  # Error, OOMKilled, Evicted, DeadlineExceeded, Unschedulable, ImagePullBackOff, ...
    exit_code: int | None = None
    message: str = ""
    restarts: int = 0
    last_lines: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    # What the retry policy's classification reads (follow/failure.py): the type as the pod's labels
    # name it, the container's memory limit, whether the pod was being deleted, and the reason of a
    # DisruptionTarget condition (a node lost, an eviction, a preemption).
    replica_type: str | None = None
    memory_limit: str | None = None
    deleted: bool = False
    disruption: str | None = None

    def summary(self) -> str:
        parts = [self.reason]
        if self.exit_code is not None:
            parts.append(f"exit code {self.exit_code}{_signal_hint(self.exit_code)}")
        return f"{self.replica} failed: {', '.join(parts)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "replica": self.replica,
            "pod": self.pod,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "message": self.message,
            "restarts": self.restarts,
            "last_lines": list(self.last_lines),
            "events": list(self.events),
            "replica_type": self.replica_type,
            "memory_limit": self.memory_limit,
            "deleted": self.deleted,
            "disruption": self.disruption,
        }


def _signal_hint(code: int) -> str:
    sig = _SIGNALS.get(code)
    if sig is None:
        return ""
    if code == 137:
        return " (SIGKILL: often the memory limit, i.e. an OOM kill)"
    return f" ({sig})"


def _terminated(cs: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The most relevant termination of the container: the current one, else the last one."""
    if not cs:
        return None
    for key in ("state", "lastState"):
        term = (cs.get(key) or {}).get("terminated")
        if term:
            return dict(term)
    return None


def pod_failure(
    pod: Mapping[str, Any], container: str = CONTAINER_NAME
) -> tuple[str, int | None, str] | None:
    """(reason, exit code, message) if the pod shows a failure (now or in its last run), else None."""
    status = pod.get("status") or {}
    if status.get("reason") in POD_FAILURES:
        cs = container_status(pod, container)
        term = _terminated(cs)
        return (
            str(status["reason"]),
            (int(term["exitCode"]) if term else None),
            str(status.get("message") or ""),
        )
    cs = container_status(pod, container)
    if cs:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in WAITING_FAILURES:
            term = _terminated(cs)
            return (
                str(waiting["reason"]),
                int(term["exitCode"]) if term and term.get("exitCode") is not None else None,
                str(waiting.get("message") or ""),
            )
        term = _terminated(cs)
        if term and int(term.get("exitCode") or 0) != 0:
            return str(term.get("reason") or "Error"), int(term["exitCode"]), str(term.get("message") or "")
    if status.get("phase") == "Failed":
        return str(status.get("reason") or "Failed"), None, str(status.get("message") or "")
    disrupted = disruption(pod)
    if disrupted is not None:
        return disrupted[0], None, disrupted[1]
    if (pod.get("metadata") or {}).get("deletionTimestamp") and status.get("phase") == "Running":
        # Deleted while it ran, its kubelet not (yet) reporting an exit: the training-operator counts
        # it failed; nobody but the cluster or a person deleted it.
        return "Deleted", None, "the pod was deleted while it ran"
    unsched = scheduling_problem(pod)
    if unsched is not None:
        return unsched[0], None, unsched[1]
    return None


def disruption(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of the pod's DisruptionTarget condition: the cluster is taking it away (its
    node lost, an eviction, a preemption), as Kubernetes 1.26+ marks it."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return str(cond.get("reason") or "DisruptionTarget"), str(cond.get("message") or "")
    return None


def memory_limit(pod: Mapping[str, Any], container: str) -> str | None:
    """The container's memory limit as its spec writes it ("512Mi"), or None."""
    for c in (pod.get("spec") or {}).get("containers") or []:
        if isinstance(c, Mapping) and c.get("name") == container:
            value = ((c.get("resources") or {}).get("limits") or {}).get("memory")
            return str(value) if value is not None else None
    return None


def scheduling_problem(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of a pod the scheduler could not place, or whose image cannot be pulled."""
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("reason") or "Unschedulable"), str(cond.get("message") or "")
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in ("ImagePullBackOff", "ErrImagePull", "InvalidImageName"):
            return str(waiting["reason"]), str(waiting.get("message") or "")
    return None


# Waiting reasons after which a container will not start without a change to the pod: the kubelet
# tried the image and backs off (a lone ErrImagePull may still be a passing registry hiccup).
CANNOT_START = ("ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")


def cannot_start(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """"<pod>: <reason>: <message>" for each pod whose container cannot start as it is."""
    out = []
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in CANNOT_START:
                name = (pod.get("metadata") or {}).get("name", "")
                out.append(f"{name}: {waiting['reason']}: {waiting.get('message') or ''}".rstrip(": "))
                break
    return out


def format_event(ev: Mapping[str, Any]) -> str:
    """One event as `kubectl describe` lists it: type, reason, (count), message."""
    count = int(ev.get("count") or 1)
    times = f" (x{count})" if count > 1 else ""
    inv = ev.get("involvedObject") or {}
    obj = f"{str(inv.get('kind', '')).lower()}/{inv.get('name', '')}"
    return f"{ev.get('type', 'Normal'):<7} {ev.get('reason', ''):<24} {obj}: {ev.get('message', '')}{times}"


def warning_events(events: Iterable[Mapping[str, Any]], names: Sequence[str]) -> list[str]:
    return [
        format_event(ev)
        for ev in events
        if ev.get("type") == "Warning" and (ev.get("involvedObject") or {}).get("name") in names
    ]


def diagnose(
    job_name: str,
    pods: Iterable[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]],
    rings: Mapping[str, Sequence[str]],
    failed_replica_types: Sequence[str] = (),
    tail: int = 20,
    container: str = CONTAINER_NAME,
) -> list[ReplicaDiagnosis]:
    """One diagnosis per failing replica (last known state of each pod), in replica order.

    A replica type the job reports as failed but whose pods were never seen failing (deleted before we
    looked) gets an entry built from its ring buffer and the job's events alone.
    """
    events = list(events)
    found: dict[str, ReplicaDiagnosis] = {}
    seen_types: set[str] = set()
    for pod in pods:
        ident = pod_replica(pod)
        if ident is None:
            continue
        name = replica_name(*ident)
        failure = pod_failure(pod, main_container(pod, container))
        if failure is None:
            continue
        seen_types.add(ident[0].lower())
        reason, code, message = failure
        pod_name = str((pod.get("metadata") or {}).get("name", ""))
        main = main_container(pod, container)
        cs = container_status(pod, main)
        disrupted = disruption(pod)
        found[name] = ReplicaDiagnosis(
            replica=name,
            pod=pod_name,
            reason=reason,
            exit_code=code,
            message=message,
            restarts=int((cs or {}).get("restartCount") or 0),
            last_lines=list(rings.get(name, ()))[-tail:],
            events=warning_events(events, [pod_name, job_name]),
            replica_type=ident[0],
            memory_limit=memory_limit(pod, main),
            deleted=bool((pod.get("metadata") or {}).get("deletionTimestamp")),
            disruption=disrupted[0] if disrupted else None,
        )
    for rtype in failed_replica_types:
        if rtype.lower() in seen_types:
            continue
        told = _pod_events(events, f"{job_name}-{rtype.lower()}-") or _pod_events(events, f"{job_name}-")
        name = f"{rtype.lower()}-?"
        found[name] = ReplicaDiagnosis(
            replica=f"{rtype.lower()} replica(s)",
            pod="(pods no longer exist)",
            reason="Failed",
            last_lines=[
                f"[{r}] {line}"
                for r, lines in sorted(rings.items())
                if r.startswith(rtype.lower() + "-")
                for line in list(lines)[-tail:]
            ][-tail:],
            events=warning_events(events, [job_name]) + [format_event(e) for e in told],
            replica_type=rtype,
            disruption=next((_EVENT_DISRUPTIONS[str(e.get("reason"))] for e in reversed(told)), None),
        )
    return [found[k] for k in sorted(found)]


# Pod events that outlive a pod and say the cluster took it away, as the DisruptionTarget reason the pod
# carried (its node lost: the node lifecycle and taint-eviction controllers; the kubelet's eviction; the
# scheduler's preemption).
_EVENT_DISRUPTIONS = {
    "TaintManagerEviction": "DeletionByTaintManager",
    "NodeNotReady": "DeletionByTaintManager",
    "Evicted": "TerminationByKubelet",
    "Preempted": "PreemptionByScheduler",
}


def _pod_events(events: Sequence[Mapping[str, Any]], prefix: str) -> list[Mapping[str, Any]]:
    """The events of pods named ``prefix...`` that tell a disruption, oldest first."""
    return [
        e
        for e in events
        if (e.get("involvedObject") or {}).get("kind") == "Pod"
        and str((e.get("involvedObject") or {}).get("name", "")).startswith(prefix)
        and e.get("reason") in _EVENT_DISRUPTIONS
    ]


def types_without_pods(pods: Iterable[Mapping[str, Any]], failed_replica_types: Sequence[str]) -> list[str]:
    """The failed replica types of which no pod is known."""
    seen = {ident[0].lower() for ident in map(pod_replica, pods) if ident is not None}
    return [t for t in failed_replica_types if t.lower() not in seen]


def format_block(diagnoses: Sequence[ReplicaDiagnosis]) -> list[str]:
    """Lines for the task log: one section per failing replica."""
    out: list[str] = []
    for d in diagnoses:
        out.append(f"=== {d.summary()} ===")
        out.append(f"pod: {d.pod}" + (f", restarts: {d.restarts}" if d.restarts else ""))
        if d.message:
            out.append(f"message: {d.message}")
        if d.last_lines:
            out.append(f"last {len(d.last_lines)} log lines of {d.replica}:")
            out.extend(f"  | {line}" for line in d.last_lines)
        else:
            out.append(f"no log lines were read from {d.replica}")
        if d.events:
            out.append("warning events:")
            out.extend(f"  {e}" for e in d.events)
    return out


def summary_line(diagnoses: Sequence[ReplicaDiagnosis], job_message: str = "") -> str:
    """One line for the task's exception: which replicas failed and why."""
    if not diagnoses:
        return job_message
    text = "; ".join(d.summary() for d in diagnoses)
    return f"{text} ({job_message})" if job_message else text
