"""Server-side tables for kubectl (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`): the columns
`kubectl get` prints for each kind, and the ages it shows."""

from __future__ import annotations

import datetime as dt
from typing import Any

from aiohttp import web

from airflow_tfjob.local.model.resources import JOB_PLURALS, JsonDict, ResourceType, parse_rfc3339


def wants_table(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return "as=Table" in accept.split(",", 1)[0]


def human_duration(seconds: float) -> str:
    """Go's duration.HumanDuration, which kubectl's AGE column shows."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 8760}y" if days == 0 else f"{hours // 8760}y{days}d"
    return f"{hours // 8760}y"


def _age(timestamp: Any) -> str:
    when = parse_rfc3339(timestamp)
    if when is None:
        return "<unknown>"
    return human_duration((dt.datetime.now(dt.timezone.utc) - when).total_seconds())


def _pod_cells(pod: JsonDict) -> list[Any]:
    """READY, STATUS, RESTARTS as kubectl's pod printer computes them (simplified: no init containers)."""
    status = pod.get("status") or {}
    statuses = [c for c in status.get("containerStatuses") or [] if isinstance(c, dict)]
    total = len((pod.get("spec") or {}).get("containers") or [])
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for c in reversed(statuses):
        state = c.get("state") or {}
        if (state.get("waiting") or {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            term = state["terminated"] or {}
            reason = term.get("reason") or (
                f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode', 0)}")
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Terminating"
    return [f"{ready}/{total}", reason, restarts]


def _service_cells(svc: JsonDict) -> list[Any]:
    spec = svc.get("spec") or {}
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    external = ",".join(str(i.get("ip") or i.get("hostname")) for i in ingress if isinstance(i, dict))
    if not external:
        external = "<pending>" if spec.get("type") == "LoadBalancer" else "<none>"
    ports = ",".join(
        f"{p.get('port')}{':' + str(p['nodePort']) if p.get('nodePort') else ''}/{p.get('protocol', 'TCP')}"
        for p in spec.get("ports") or [] if isinstance(p, dict)
    ) or "<none>"
    return [spec.get("type", "ClusterIP"), spec.get("clusterIP", "<none>"), external, ports]


def _job_state(job: JsonDict) -> str:
    """Every job CRD's State printer column: `.status.conditions[-1:].type`."""
    conditions = (job.get("status") or {}).get("conditions") or []
    last = conditions[-1] if conditions and isinstance(conditions[-1], dict) else {}
    return str(last.get("type", ""))


def _jobset_cells(js: JsonDict) -> list[Any]:
    """JobSet v0.12.0's printer columns: terminalState, restarts, the Completed condition, spec.suspend."""
    status = js.get("status") or {}
    completed = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Completed"), "")
    return [status.get("terminalState", ""), str(status.get("restarts", "")), completed or "",
            str((js.get("spec") or {}).get("suspend", "")).lower()]


def _batch_job_cells(job: JsonDict) -> list[Any]:
    """kubectl's Job columns (simplified): the finishing condition or Running, succeeded/completions, duration."""
    status, spec = job.get("status") or {}, job.get("spec") or {}
    state = "Running"
    for cond in status.get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed", "Suspended"):
            state = cond["type"]
    duration = ""
    start = parse_rfc3339(status.get("startTime"))
    if start is not None:
        end = parse_rfc3339(status.get("completionTime")) or dt.datetime.now(dt.timezone.utc)
        duration = human_duration((end - start).total_seconds())
    return [state, f"{status.get('succeeded', 0)}/{spec.get('completions', 1)}", duration]


_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "pods": [("Ready", "string"), ("Status", "string"), ("Restarts", "integer")],
    **{plural: [("State", "string")] for plural in (*JOB_PLURALS, "trainjobs")},
    "jobsets": [("TerminalState", "string"), ("Restarts", "string"), ("Completed", "string"),
                ("Suspended", "string")],
    "jobs": [("Status", "string"), ("Completions", "string"), ("Duration", "string")],
    "services": [("Type", "string"), ("Cluster-IP", "string"), ("External-IP", "string"), ("Port(s)", "string")],
    "namespaces": [("Status", "string")],
    "configmaps": [("Data", "integer")],
    "secrets": [("Type", "string"), ("Data", "integer")],
}


def _condition_status(obj: JsonDict, type_: str) -> str:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return str(cond.get("status", ""))
    return ""


def _get(obj: JsonDict, *path: str) -> Any:
    value: Any = obj
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return "" if value is None else value


# Kueue's CRD printer columns (name, type, priority, cell), docs/reference/kueue-behaviour.md §1.
_KUEUE_COLUMNS: dict[str, list[tuple[str, str, int, Any]]] = {
    "workloads": [
        ("Queue", "string", 0, lambda o: _get(o, "spec", "queueName")),
        ("Reserved in", "string", 0, lambda o: _get(o, "status", "admission", "clusterQueue")),
        ("Admitted", "string", 0, lambda o: _condition_status(o, "Admitted")),
        ("Finished", "string", 0, lambda o: _condition_status(o, "Finished")),
    ],
    "clusterqueues": [
        ("Cohort", "string", 0, lambda o: _get(o, "spec", "cohortName")),
        ("Strategy", "string", 1, lambda o: _get(o, "spec", "queueingStrategy")),
        ("Pending Workloads", "integer", 0, lambda o: _get(o, "status", "pendingWorkloads")),
        ("Admitted Workloads", "integer", 1, lambda o: _get(o, "status", "admittedWorkloads")),
    ],
    "localqueues": [
        ("ClusterQueue", "string", 0, lambda o: _get(o, "spec", "clusterQueue")),
        ("Pending Workloads", "integer", 0, lambda o: _get(o, "status", "pendingWorkloads")),
        ("Admitted Workloads", "integer", 0, lambda o: _get(o, "status", "admittedWorkloads")),
    ],
    "workloadpriorityclasses": [("Value", "integer", 0, lambda o: o.get("value", ""))],
    "resourceflavors": [],
}


def _cells(info: ResourceType, obj: JsonDict) -> list[Any]:
    meta = obj.get("metadata") or {}
    if info.plural == "events":
        involved = obj.get("involvedObject") or {}
        return [_age(obj.get("lastTimestamp") or meta.get("creationTimestamp")), obj.get("type", ""),
                obj.get("reason", ""), f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
                obj.get("message", "")]
    extra: list[Any] = []
    if info.plural in _KUEUE_COLUMNS:
        extra = [cell(obj) for _, _, _, cell in _KUEUE_COLUMNS[info.plural]]
    elif info.plural == "pods":
        extra = _pod_cells(obj)
    elif info.plural in JOB_PLURALS or info.plural == "trainjobs":
        extra = [_job_state(obj)]
    elif info.plural == "jobsets":
        extra = _jobset_cells(obj)
    elif info.plural == "jobs":
        extra = _batch_job_cells(obj)
    elif info.plural == "services":
        extra = _service_cells(obj)
    elif info.plural == "namespaces":
        extra = [(obj.get("status") or {}).get("phase", "")]
    elif info.plural == "configmaps":
        extra = [len(obj.get("data") or {}) + len(obj.get("binaryData") or {})]
    elif info.plural == "secrets":
        extra = [obj.get("type", ""), len(obj.get("data") or {})]
    cells = [meta.get("name", ""), *extra, _age(meta.get("creationTimestamp"))]
    if info.plural == "pods":  # the -o wide columns
        status, spec = obj.get("status") or {}, obj.get("spec") or {}
        cells += [status.get("podIP") or "<none>", spec.get("nodeName") or "<none>", "<none>", "<none>"]
    return cells


def to_table(info: ResourceType, objects: list[JsonDict], rv: str, include_object: str | None) -> JsonDict:
    if info.plural == "events":
        columns = [("Last Seen", "string"), ("Type", "string"), ("Reason", "string"), ("Object", "string"),
                   ("Message", "string")]
    else:
        kueue = [(name, type_) for name, type_, _, _ in _KUEUE_COLUMNS.get(info.plural, [])]
        columns = [("Name", "string"), *_COLUMNS.get(info.plural, kueue), ("Age", "string")]
    definitions = [
        {"name": name, "type": type_, "format": "name" if name == "Name" else "", "description": "", "priority": 0}
        for name, type_ in columns
    ]
    if info.plural in _KUEUE_COLUMNS:
        for definition, (_, _, priority, _) in zip(definitions[1:], _KUEUE_COLUMNS[info.plural], strict=False):
            definition["priority"] = priority
    if info.plural == "pods":
        definitions += [{"name": name, "type": "string", "format": "", "description": "", "priority": 1}
                        for name in ("IP", "Node", "Nominated Node", "Readiness Gates")]
    rows = []
    for obj in objects:
        row: JsonDict = {"cells": _cells(info, obj)}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj.get("metadata", {})}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
            "columnDefinitions": definitions, "rows": rows}
