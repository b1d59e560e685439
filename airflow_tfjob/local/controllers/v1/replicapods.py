"""What a reconcile pass reads from a job's pods, for any kind (the training-operator's pkg/core/pod.go):
the pods or services of one replica type sliced by index, and the warnings RecordAbnormalPods emits."""

from __future__ import annotations

from airflow_tfjob.constants import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from airflow_tfjob.local.model.resources import JsonDict


def abnormal_pod_events(active_pods: list[JsonDict]) -> list[tuple[str, str, str]]:
    """RecordAbnormalPods: a warning (type, reason, message) per failed or waiting container of an active
    pod, or per false condition of a pod that has no container statuses yet."""
    found: list[tuple[str, str, str]] = []
    for pod in active_pods:
        pname = pod["metadata"]["name"]
        pstatus = pod.get("status", {})
        statuses = pstatus.get("containerStatuses") or pstatus.get("initContainerStatuses") or []
        if statuses:
            for cs in statuses:
                state = cs.get("state") or {}
                term = state.get("terminated")
                if term is not None and int(term.get("exitCode", 0)) != 0:
                    found.append((
                        "Warning",
                        term.get("reason", ""),
                        f"Error pod {pname} container {cs.get('name')} exitCode: {term.get('exitCode')} "
                        f"terminated message: {term.get('message', '')}",
                    ))
                wait = state.get("waiting")
                if wait is not None and wait.get("message"):
                    found.append((
                        "Warning",
                        wait.get("reason", ""),
                        f"Error pod {pname} container {cs.get('name')} waiting message: {wait['message']}",
                    ))
            continue
        for cond in pstatus.get("conditions") or []:
            if cond.get("status") != "True" and cond.get("reason"):
                found.append((
                    "Warning",
                    cond["reason"],
                    f"Error pod {pname} condition message: {cond.get('message', '')}",
                ))
    return found


def replica_slices(objs: list[JsonDict], rtype: str, replicas: int) -> list[list[JsonDict]]:
    """GetPodSlices: the objects of one replica type by index, at least `replicas` slices (an object
    with an index beyond them gets its own slice, so that it is seen and deleted)."""
    rt = rtype.lower()
    mine = [o for o in objs if o["metadata"].get("labels", {}).get(LABEL_REPLICA_TYPE) == rt]
    indexed: list[tuple[int, JsonDict]] = []
    for obj in mine:
        raw = obj["metadata"].get("labels", {}).get(LABEL_REPLICA_INDEX)
        try:
            index = int(str(raw))
        except ValueError:
            continue
        if index >= 0:
            indexed.append((index, obj))
    size = max([replicas, *[i + 1 for i, _ in indexed]])
    slices: list[list[JsonDict]] = [[] for _ in range(size)]
    for index, obj in indexed:
        slices[index].append(obj)
    return slices
