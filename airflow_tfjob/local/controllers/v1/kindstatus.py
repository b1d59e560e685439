"""UpdateJobStatus of the kubeflow.org/v1 kinds (training-operator v1.9.4), keyed by the kind's
`success_rule` and `failure_rule` (airflow_tfjob/jobs/kinds.py): TFJob's pair (SUCCESS_TF, FAILURE_TF) is
tfjob_controller.go's UpdateJobStatus, the others' one function (docs/reference/kubeflow-v1-kinds.md
§§1.6, 2.5, 3.5, 4.5). The rules read a pass (jobpass.JobPass) and the kind's row, so that a kind is a row
and this module sits below the passes that call it (kindpass.py).

Messages: a job with a Master spec says `{Kind} {name} is running.` / `{Kind} {name} is successfully
completed.`; one without says `{Kind} {ns}/{name} is running.` / `{Kind} {ns}/{name} successfully
completed.` (XGBoostJob always has its Master, JAXJob never has one). Failures say `is failed because`,
unlike TFJob's `has failed because`. The operator visits the types in Go map order; here they come in
the kind table's order (Master before Worker), so a pass that sees a Master success and a Worker
failure under Never ends Succeeded, which the operator does in some runs and not in others.

TFJob (tfjob_controller.go): with a Chief/Master its completion decides, otherwise the Workers' (all of
them, or worker 0 unless successPolicy is AllWorkers); a failed replica keeps a Restarting condition as it
is, is ignored for Workers under enableDynamicWorker, and fails the job otherwise. Its messages always
name `{ns}/{name}`.
"""

from __future__ import annotations

from airflow_tfjob.constants import LABEL_JOB_NAME, LABEL_OPERATOR_NAME, LABEL_REPLICA_TYPE
from airflow_tfjob.jobs.kinds import (
    FAILURE_RESTART_ONLY_EXITCODE,
    SUCCESS_ALL_WORKERS,
    SUCCESS_MASTER,
    SUCCESS_MASTER_ELSE_WORKERS,
    SUCCESS_TF,
    JobKind,
)
from airflow_tfjob.local.controllers.v1.jobpass import JobPass
from airflow_tfjob.local.controllers.v1.status import (
    container_exit_code,
    counts,
    get_condition,
    set_condition,
)
from airflow_tfjob.local.model.resources import ApiError, now_rfc3339


def selector(p: JobPass, rtype: str) -> str:
    """metav1.FormatLabelSelector of GenLabelSelector: the three labels, keys sorted."""
    labels = {
        LABEL_OPERATOR_NAME: p.controller_name,
        LABEL_JOB_NAME: p.name.replace("/", "-"),
        LABEL_REPLICA_TYPE: rtype.lower(),
    }
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def update_job_status(p: JobPass, kind: JobKind, *, any_worker_succeeds: bool) -> None:
    """Running/Succeeded/Failed/Restarting of `p.status` from its recounted replica statuses, by the rules
    of `kind`'s row; `any_worker_succeeds`: one succeeded Worker ends a Master-less job (PyTorch elastic)."""
    if kind.success_rule == SUCCESS_TF:
        _update_tf_status(p, kind)
        return
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
            if expected == 0 or (any_worker_succeeds and succeeded > 0):
                _succeed(p, who, master)
            elif active > 0:
                _running(p, running_msg)
        if kind.failure_rule == FAILURE_RESTART_ONLY_EXITCODE:
            if failed > 0:
                _running(p, running_msg)
                _failure(p, rtype, failed, restart=p.replicas[rtype].get("restartPolicy") == "ExitCode")
        elif failed > 0 and replicas > succeeded + active:
            _failure(p, rtype, failed, restart=p.replicas[rtype].get("restartPolicy") != "Never")


def _running(p: JobPass, msg: str) -> None:
    set_condition(p.status, "Running", "True", f"{p.kind}Running", msg)


def _finish(p: JobPass, ctype: str, msg: str) -> None:
    """The job ends `ctype` (Succeeded or Failed): the Normal event, completionTime once, the condition."""
    p.event("Normal", f"{p.kind}{ctype}", msg)
    if not p.status.get("completionTime"):
        p.status["completionTime"] = now_rfc3339()
    set_condition(p.status, ctype, "True", f"{p.kind}{ctype}", msg)


def _succeed(p: JobPass, who: str, master: bool) -> None:
    _finish(p, "Succeeded",
            f"{p.kind} {who} is successfully completed." if master else f"{p.kind} {who} successfully completed.")


def _failure(p: JobPass, rtype: str, failed: int, *, restart: bool) -> None:
    if restart:
        msg = f"{p.kind} {p.name} is restarting because {failed} {rtype} replica(s) failed."
        p.event("Warning", f"{p.kind}Restarting", msg)
        set_condition(p.status, "Restarting", "True", f"{p.kind}Restarting", msg)
        return
    _finish(p, "Failed", f"{p.kind} {p.name} is failed because {failed} {rtype} replica(s) failed.")


def _update_tf_status(p: JobPass, kind: JobKind) -> None:
    worker0_completed = _tf_worker0_completed(p, kind)
    if not p.status.get("startTime"):
        p.status["startTime"] = now_rfc3339()
    chief_spec = "Chief" in p.replicas or "Master" in p.replicas
    ns_name = f"{p.namespace}/{p.name}"
    running_msg = f"{p.kind} {ns_name} is running."
    for rtype in [t for t in kind.replica_types if t in p.replicas]:
        active, succeeded, failed = counts(p.status, rtype)
        expected = p.count(rtype) - succeeded
        if chief_spec:
            if rtype in ("Chief", "Master"):
                if active > 0:
                    _running(p, running_msg)
                if expected == 0:
                    _finish(p, "Succeeded", f"{p.kind} {ns_name} successfully completed.")
        elif rtype == "Worker":
            all_workers = p.spec.get("successPolicy") == "AllWorkers"
            if expected == 0 or (worker0_completed and not all_workers):
                _finish(p, "Succeeded", f"{p.kind} {ns_name} successfully completed.")
            elif active > 0:
                _running(p, running_msg)
        if failed > 0:
            restarting = get_condition(p.status, "Restarting")
            if restarting is not None:
                set_condition(p.status, "Restarting", "True", restarting.get("reason", ""),
                              restarting.get("message", ""))
            elif p.spec.get("enableDynamicWorker") is True and rtype == "Worker":
                continue
            else:
                _finish(p, "Failed", f"{p.kind} {ns_name} has failed because {failed} {rtype} replica(s) failed.")


def _tf_worker0_completed(p: JobPass, kind: JobKind) -> bool:
    """Whether the job's own worker 0 pod ended Succeeded with exit code 0 in the kind's container."""
    try:
        pod = p.store.get("pods", p.namespace, f"{p.name}-worker-0")
    except ApiError:
        return False
    refs = pod["metadata"].get("ownerReferences") or []
    if not any(r.get("uid") == p.uid and r.get("controller") for r in refs):
        return False
    return container_exit_code(pod, kind.container) == 0 and pod.get("status", {}).get("phase") == "Succeeded"
