"""TFJob controller of the local cluster, imitating training-operator v1.9.4 (its tfjob_controller.go):
the TFJob names and defaults (SetDefaults_TFJob), TF_CONFIG, the master role and UpdateJobStatus, on
the shared job controller (controller.py) and reconcile pass (jobpass.py).

Reasons and events are the operator's (`TFJobCreated`, `TFJobRunning`, ..., component
`tfjob-controller`); UpdateJobStatus follows tfjob_controller.go: with a Chief/Master its completion decides,
otherwise the Workers' (all of them, or worker 0 unless successPolicy is AllWorkers).

Deliberate differences from a real cluster, all visible to users:

* Addresses. The operator writes `{job}-{type}-{i}.{ns}.svc:{port}` into TF_CONFIG. Every replica of the
  local cluster runs on this host and there is no cluster DNS, so each (job, type, index) gets its own
  127.0.0.1 port from `port_allocator` and TF_CONFIG says `127.0.0.1:{port}` instead; the rest of
  TF_CONFIG is byte for byte the operator's. The port is recorded in the annotation
  `local.tfjob.dev/host-port` on the replica's Pod and Service, and as the `targetPort` of the Service's
  `tfjob-port` (the Service's `port` stays the declared containerPort, 2222 by default). A replica keeps
  its port when its pod is recreated (ExitCode restarts). TF servers listen on the port of their own
  TF_CONFIG address, so replicas need nothing else.
* activeDeadlineSeconds fires on time: the operator only notices the deadline when some other event
  triggers a reconcile (kubeflow/trainer#3358); here a timer reconciles the job at the deadline.
* Reconcile errors (for example a Service name longer than 63 characters, kubeflow/trainer#1101) are
  retried with an exponential backoff from 0.5 s up to 60 s, shorter than controller-runtime's 1000 s cap,
  so the repeated FailedCreateService warnings stay few (they are aggregated into one Event's count).
* On backoffLimit/deadline failure the Failed condition is set before cleanup, as v1.9.4 does
  (training-operator PR #3420): cleanPodPolicy is respected, so with the default `None` the pods keep running.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from airflow_tfjob.constants import API_VERSION, CONTAINER_NAME, DEFAULT_PORT, KIND, PORT_NAME
from airflow_tfjob.local.controllers.v1.controller import JobController
from airflow_tfjob.local.controllers.v1.jobpass import JobPass
from airflow_tfjob.local.controllers.v1.status import (
    container_exit_code,
    counts,
    get_condition,
    set_condition,
)
from airflow_tfjob.local.controllers.v1.tfconfig import tf_config
from airflow_tfjob.local.model.resources import ApiError, JsonDict, now_rfc3339
from airflow_tfjob.local.node.ports import ANNOTATION_HOST_PORT

CONTROLLER_NAME = "tfjob-controller"
# UpdateJobStatus walks the known types in this order (it matters for which condition comes last).
STATUS_ORDER = ("Chief", "Evaluator", "Master", "PS", "Worker")

# --------------------------------------------------------------------------------------------------
# Defaulting (SetDefaults_TFJob), in memory only


def default_spec(spec: JsonDict) -> JsonDict:
    """A defaulted copy of a TFJob spec: canonical replica keys, replicas 1, restartPolicy Never,
    cleanPodPolicy None, successPolicy "", and the tfjob-port on the tensorflow container."""

    spec = copy.deepcopy(spec) if isinstance(spec, dict) else {}
    run_policy = spec.get("runPolicy")
    if not isinstance(run_policy, dict):
        run_policy = spec["runPolicy"] = {}
    run_policy.setdefault("cleanPodPolicy", "None")
    if spec.get("successPolicy") is None:
        spec["successPolicy"] = ""
    replicas = spec.get("tfReplicaSpecs")
    if not isinstance(replicas, dict):
        replicas = {}
    renamed: JsonDict = {}
    for key, value in replicas.items():
        canonical = next((t for t in STATUS_ORDER if t.lower() == str(key).lower()), key)
        renamed[canonical] = value if isinstance(value, dict) else {}
    for rspec in renamed.values():
        if rspec.get("replicas") is None:
            rspec["replicas"] = 1
        if not rspec.get("restartPolicy"):
            rspec["restartPolicy"] = "Never"
        _default_port(rspec.setdefault("template", {}).setdefault("spec", {}))
    spec["tfReplicaSpecs"] = renamed
    return spec


def _default_port(pod_spec: JsonDict) -> None:
    containers = pod_spec.get("containers") or []
    if not containers:
        return
    index = next((i for i, c in enumerate(containers) if c.get("name") == CONTAINER_NAME), 0)
    ports = containers[index].setdefault("ports", [])
    if not any(p.get("name") == PORT_NAME for p in ports):
        ports.append({"name": PORT_NAME, "containerPort": DEFAULT_PORT})


def ordered_types(replicas: Iterable[str]) -> list[str]:
    """Known types in the operator's status order, then unknown ones (they get pods, not status)."""
    names = list(replicas)
    return [t for t in STATUS_ORDER if t in names] + sorted(t for t in names if t not in STATUS_ORDER)


def has_chief_or_master(replicas: JsonDict) -> bool:
    return "Chief" in replicas or "Master" in replicas


def is_master_role(replicas: JsonDict, rtype: str, index: int) -> bool:
    if has_chief_or_master(replicas):
        return rtype in ("Chief", "Master")
    return rtype == "Worker" and index == 0


class TFJobPass(JobPass):
    """One reconcile pass over a TFJob."""

    kind = KIND
    plural = "tfjobs"
    api_version = API_VERSION
    controller_name = CONTROLLER_NAME
    replica_specs_field = "tfReplicaSpecs"
    container_name = CONTAINER_NAME
    port_name = PORT_NAME

    def default_spec(self, spec: JsonDict) -> JsonDict:
        return default_spec(spec)

    def ordered_types(self) -> list[str]:
        return ordered_types(self.replicas)

    def is_master_role(self, rtype: str, index: int) -> bool:
        return is_master_role(self.replicas, rtype, index)

    def set_cluster_spec(self, pod_spec: JsonDict, rt: str, index: int) -> None:
        counts = {t.lower(): max(int(s.get("replicas", 1)), 0) for t, s in self.replicas.items()}

        def address(other_rt: str, other_index: int) -> str:
            return f"127.0.0.1:{self.c.ports.port(self.uid, other_rt, other_index)}"

        value = tf_config(
            counts, rt, index, address, dynamic_worker=self.spec.get("enableDynamicWorker") is True
        )
        if value is None:
            return
        for container in pod_spec.get("containers") or []:
            if container.get("name") == CONTAINER_NAME:
                container["env"] = [*(container.get("env") or []), {"name": "TF_CONFIG", "value": value}]
                break

    # ---- UpdateJobStatus (tfjob_controller.go)

    def update_job_status(self) -> None:
        worker0_completed = self._worker0_completed()
        if not self.status.get("startTime"):
            self.status["startTime"] = now_rfc3339()
        chief_spec = has_chief_or_master(self.replicas)
        ns_name = f"{self.namespace}/{self.name}"
        for rtype in [t for t in STATUS_ORDER if t in self.replicas]:
            active, succeeded, failed = counts(self.status, rtype)
            expected = max(int(self.replicas[rtype].get("replicas", 1)), 0) - succeeded
            if chief_spec:
                if rtype in ("Chief", "Master"):
                    if active > 0:
                        set_condition(
                            self.status, "Running", "True", "TFJobRunning", f"TFJob {ns_name} is running."
                        )
                    if expected == 0:
                        self._succeed(ns_name)
            elif rtype == "Worker":
                all_workers = self.spec.get("successPolicy") == "AllWorkers"
                if expected == 0 or (worker0_completed and not all_workers):
                    self._succeed(ns_name)
                elif active > 0:
                    set_condition(
                        self.status, "Running", "True", "TFJobRunning", f"TFJob {ns_name} is running."
                    )
            if failed > 0:
                restarting = get_condition(self.status, "Restarting")
                if restarting is not None:
                    set_condition(
                        self.status,
                        "Restarting",
                        "True",
                        restarting.get("reason", ""),
                        restarting.get("message", ""),
                    )
                elif self.spec.get("enableDynamicWorker") is True and rtype == "Worker":
                    continue
                else:
                    msg = f"TFJob {ns_name} has failed because {failed} {rtype} replica(s) failed."
                    self.event("Normal", "TFJobFailed", msg)
                    if not self.status.get("completionTime"):
                        self.status["completionTime"] = now_rfc3339()
                    set_condition(self.status, "Failed", "True", "TFJobFailed", msg)

    def _succeed(self, ns_name: str) -> None:
        msg = f"TFJob {ns_name} successfully completed."
        self.event("Normal", "TFJobSucceeded", msg)
        if not self.status.get("completionTime"):
            self.status["completionTime"] = now_rfc3339()
        set_condition(self.status, "Succeeded", "True", "TFJobSucceeded", msg)

    def _worker0_completed(self) -> bool:
        try:
            pod = self.store.get("pods", self.namespace, f"{self.name}-worker-0")
        except ApiError:
            return False
        refs = pod["metadata"].get("ownerReferences") or []
        if not any(r.get("uid") == self.uid and r.get("controller") for r in refs):
            return False
        return container_exit_code(pod, CONTAINER_NAME) == 0 and pod.get("status", {}).get("phase") == "Succeeded"


class Controller(JobController):
    """Watches TFJobs, pods and services in the store and reconciles jobs one at a time."""

    job_pass = TFJobPass


__all__ = ["ANNOTATION_HOST_PORT", "Controller", "set_condition"]
