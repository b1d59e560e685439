"""UpdateJobStatus of PyTorchJob, XGBoostJob, JAXJob and PaddleJob (training-operator v1.9.4), one
function keyed by the kind's `success_rule` and `failure_rule` (airflow_tfjob/kinds.py); the rules and
messages are docs/reference/kubeflow-v1-kinds.md §§1.6, 2.5, 3.5, 4.5.

Messages: a job with a Master spec says `{Kind} {name} is running.` / `{Kind} {name} is successfully
completed.`; one without says `{Kind} {ns}/{name} is running.` / `{Kind} {ns}/{name} successfully
completed.` (XGBoostJob always has its Master, JAXJob never has one). Failures say `is failed because`,
unlike TFJob's `has failed because`. The operator visits the types in Go map order; here they come in
the kind table's order (Master before Worker), so a pass that sees a Master success and a Worker
failure under Never ends Succeeded, which the operator does in some runs and not in others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_tfjob.constants import LABEL_JOB_NAME, LABEL_OPERATOR_NAME, LABEL_REPLICA_TYPE
from airflow_tfjob.jobs.kinds import (
    FAILURE_RESTART_ONLY_EXITCODE,
    SUCCESS_ALL_WORKERS,
    SUCCESS_MASTER,
    SUCCESS_MASTER_ELSE_WORKERS,
)
from airflow_tfjob.local.controllers.v1.status import counts, set_condition
from airflow_tfjob.local.model.resources import now_rfc3339

if TYPE_CHECKING:
    from airflow_tfjob.local.controllers.v1.kindpass import KindPass


def selector(p: KindPass, rtype: str) -> str:
    """metav1.FormatLabelSelector of GenLabelSelector: the three labels, keys sorted."""
    labels = {
        LABEL_OPERATOR_NAME: p.controller_name,
        LABEL_JOB_NAME: p.name.replace("/", "-"),
        LABEL_REPLICA_TYPE: rtype.lower(),
    }
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def update_job_status(p: KindPass) -> None:
    kind = p.jobkind
    if not p.status.get("startTime"):
        p.status["startTime"] = now_rfc3339()
    master = p.has_master()
    who = p.name if master else f"{p.namespace}/{p.name}"
    running_msg = f"{kind.kind} {who} is running."
    for rtype in p.ordered_types():
        entry = p.status.setdefault("replicaStatuses", {}).setdefault(rtype, {})
        if kind.scale_type is not None:  # PyTorchJob, JAXJob, PaddleJob write the selector; XGBoostJob not
            entry["selector"] = selector(p, rtype)
        active, succeeded, failed = counts(p.status, rtype)
        replicas = p.count(rtype)
        expected = replicas - succeeded
        if kind.success_rule == SUCCESS_MASTER:
            if rtype == "Master":
                if active > 0:
                    _running(p, running_msg)
                if expected == 0:
                    _running(p, running_msg)
                    _succeed(p, who, master)
                    return
        elif kind.success_rule in (SUCCESS_MASTER_ELSE_WORKERS, SUCCESS_ALL_WORKERS) and master:
            if rtype == "Master":
                if active > 0:
                    _running(p, running_msg)
                if expected == 0:
                    _succeed(p, who, master)
                    return
        elif rtype == "Worker":
            if expected == 0 or (p.any_worker_succeeds() and succeeded > 0):
                _succeed(p, who, master)
            elif active > 0:
                _running(p, running_msg)
        if kind.failure_rule == FAILURE_RESTART_ONLY_EXITCODE:
            if failed > 0:
                _running(p, running_msg)
                _failure(p, rtype, failed, restart=p.replicas[rtype].get("restartPolicy") == "ExitCode")
        elif failed > 0 and replicas > succeeded + active:
            _failure(p, rtype, failed, restart=p.replicas[rtype].get("restartPolicy") != "Never")


def _running(p: KindPass, msg: str) -> None:
    set_condition(p.status, "Running", "True", f"{p.kind}Running", msg)


def _succeed(p: KindPass, who: str, master: bool) -> None:
    msg = f"{p.kind} {who} is successfully completed." if master else f"{p.kind} {who} successfully completed."
    p.event("Normal", f"{p.kind}Succeeded", msg)
    if not p.status.get("completionTime"):
        p.status["completionTime"] = now_rfc3339()
    set_condition(p.status, "Succeeded", "True", f"{p.kind}Succeeded", msg)


def _failure(p: KindPass, rtype: str, failed: int, *, restart: bool) -> None:
    if restart:
        msg = f"{p.kind} {p.name} is restarting because {failed} {rtype} replica(s) failed."
        p.event("Warning", f"{p.kind}Restarting", msg)
        set_condition(p.status, "Restarting", "True", f"{p.kind}Restarting", msg)
        return
    msg = f"{p.kind} {p.name} is failed because {failed} {rtype} replica(s) failed."
    p.event("Normal", f"{p.kind}Failed", msg)
    if not p.status.get("completionTime"):
        p.status["completionTime"] = now_rfc3339()
    set_condition(p.status, "Failed", "True", f"{p.kind}Failed", msg)
