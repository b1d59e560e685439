"""One reconcile pass over one job, for any kind (the training-operator's common/job.go ReconcileJobs,
ReconcilePods and common/service.go ReconcileServices): suspend and resume, backoffLimit and
activeDeadlineSeconds, cleanPodPolicy and TTL cleanup, abnormal-pod events, replica pods and headless
Services named `{job}-{type}-{index}` and labelled as the operator labels them, restartPolicy ExitCode,
and the status write. Defaults are applied in memory only (the stored spec is never rewritten).

A kind subclasses `JobPass` with its names (kind, plural, controller name, replica specs field, container
and port names) and its hooks: defaults, type order, master role, cluster spec (TF_CONFIG, ...) and
UpdateJobStatus. tfjob.py is the TFJob one."""

from __future__ import annotations

import copy
import logging
from typing import ClassVar

from airflow_tfjob.constants import (
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_OPERATOR_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
)
from airflow_tfjob.local.controllers.v1.replicapods import abnormal_pod_events, replica_slices
from airflow_tfjob.local.controllers.v1.status import (
    container_exit_code,
    counts,
    has_true,
    is_active,
    is_finished,
    is_retryable_exit_code,
    normalise,
    now_seconds,
    parse_time,
    set_condition,
    update_replica_status,
)
from airflow_tfjob.local.model.resources import ApiError, JsonDict, now_rfc3339
from airflow_tfjob.local.node.ports import ANNOTATION_HOST_PORT, PortMap
from airflow_tfjob.local.store.core import Store
from airflow_tfjob.local.store.events import record_event

log = logging.getLogger(__name__)


class ReconcileError(Exception):
    """A reconcile pass stopped early, as the operator's returns an error: retried with backoff."""


class JobPass:
    """The state of one ReconcileJobs call for one job."""

    kind: ClassVar[str]  # "TFJob": also the prefix of condition reasons and event reasons
    plural: ClassVar[str]
    api_version: ClassVar[str]
    controller_name: ClassVar[str]  # the operator-name label and the events' component
    replica_specs_field: ClassVar[str]
    container_name: ClassVar[str]  # the container whose exit code and ports count
    port_name: ClassVar[str]  # the container port a Service targets on the replica's host port
    honours_managed_by: ClassVar[bool] = True  # skips jobs whose runPolicy.managedBy is someone else

    def __init__(self, store: Store, ports: PortMap, job: JsonDict) -> None:
        # The controller's store and host ports, not the controller: a pass is a function of the job and
        # the cluster's state, and the controller (controller.py) is the one that runs passes.
        self.store = store
        self.ports = ports
        self.job = job
        self.meta = job["metadata"]
        self.name: str = self.meta["name"]
        self.namespace: str = self.meta["namespace"]
        self.uid: str = self.meta["uid"]
        self.spec = self.default_spec(job.get("spec") or {})
        self.replicas: JsonDict = self.spec[self.replica_specs_field]
        self.run_policy: JsonDict = self.spec["runPolicy"]
        self.status: JsonDict = copy.deepcopy(job.get("status") or {})
        # onOwnerCreateFunc puts Created into the informer's copy: it is persisted with the first write.
        set_condition(self.status, "Created", "True", f"{self.kind}Created", f"{self.kind} {self.name} is created.")
        self.old = normalise(copy.deepcopy(self.status))

    # ---- what a kind provides

    def default_spec(self, spec: JsonDict) -> JsonDict:
        """A defaulted copy of the job's spec (SetDefaults_<Kind>), applied in memory only."""
        raise NotImplementedError

    def ordered_types(self) -> list[str]:
        """The replica types in the order they are reconciled."""
        raise NotImplementedError

    def is_master_role(self, rtype: str, index: int) -> bool:
        raise NotImplementedError

    def set_cluster_spec(self, pod_spec: JsonDict, rt: str, index: int) -> None:
        """Tell a new replica where its peers are (TF_CONFIG, MASTER_ADDR, ...)."""
        raise NotImplementedError

    def update_job_status(self) -> None:
        """Running/Succeeded/Failed from the recounted replica statuses (UpdateJobStatus)."""
        raise NotImplementedError

    # ---- the defaulted replica specs, as the status rules (kindstatus.py) and the kinds' environments read them

    def count(self, rtype: str) -> int:
        """The defaulted `replicas` of a type, 0 when the type is absent."""
        rspec = self.replicas.get(rtype)
        return max(int(rspec.get("replicas", 1)), 0) if rspec is not None else 0

    def has_master(self) -> bool:
        return "Master" in self.replicas

    # ---- events

    def event(self, type_: str, reason: str, message: str) -> None:
        try:
            record_event(self.store, self.job, type_, reason, message, self.controller_name)
        except ApiError:
            log.warning("could not record event %s for %s/%s", reason, self.namespace, self.name)

    # ---- main flow (common/job.go ReconcileJobs)

    def run(self) -> float | None:
        pods = self._owned("pods")
        services = self._owned("services")
        self._adopt_ports([*pods, *services])
        if is_finished(self.status):
            self._delete_pods_and_services(pods)
            if self._cleanup_job():
                return None
            if has_true(self.status, "Succeeded"):
                for entry in (self.status.get("replicaStatuses") or {}).values():
                    entry["succeeded"] = entry.get("succeeded", 0) + entry.get("active", 0)
                    entry["active"] = 0
            self._write_if_changed()
            return self._ttl_remaining()

        if self.run_policy.get("suspend") is True:
            self._delete_pods_and_services(pods)
            for entry in (self.status.get("replicaStatuses") or {}).values():
                entry["active"] = 0
            msg = f"{self.kind} {self.name} is suspended."
            if has_true(self.status, "Running"):
                set_condition(self.status, "Running", "False", f"{self.kind}Suspended", msg)
            if not has_true(self.status, "Suspended"):
                set_condition(self.status, "Suspended", "True", f"{self.kind}Suspended", msg)
            self.event("Normal", f"{self.kind}Suspended", msg)
            self._write_if_changed()
            return None

        if has_true(self.status, "Suspended"):
            msg = f"{self.kind} {self.name} is resumed."
            set_condition(self.status, "Suspended", "False", f"{self.kind}Resumed", msg)
            self.status["startTime"] = now_rfc3339()
            self.event("Normal", f"{self.kind}Resumed", msg)

        active_pods = [p for p in pods if is_active(p)]
        for warning in abnormal_pod_events(active_pods):
            self.event(*warning)
        failure = self._limit_failure(pods, active_pods)
        if failure is not None:
            if not self.status.get("completionTime"):
                self.status["completionTime"] = now_rfc3339()
            self.event("Normal", f"{self.kind}Failed", failure)
            set_condition(self.status, "Failed", "True", f"{self.kind}Failed", failure)
            self._delete_pods_and_services(pods)
            self._cleanup_job()
            self._write()
            return self._ttl_remaining()

        for rtype in self.ordered_types():
            self._reconcile_pods(pods, rtype)
            self._reconcile_services(services, rtype)
        self.update_job_status()
        self._write_if_changed()
        return self._deadline_remaining()

    # ---- listing

    def _owned(self, rtype: str) -> list[JsonDict]:
        selector = f"{LABEL_OPERATOR_NAME}={self.controller_name},{LABEL_JOB_NAME}={self.name.replace('/', '-')}"
        items, _ = self.store.list(rtype, self.namespace, label_selector=selector)
        owned = []
        for obj in items:
            for ref in obj["metadata"].get("ownerReferences") or []:
                if ref.get("controller") and ref.get("uid") == self.uid:
                    owned.append(obj)
                    break
        return owned

    def _adopt_ports(self, objs: list[JsonDict]) -> None:
        """Keep the ports already handed out (a controller restarted over a live store)."""
        for obj in objs:
            labels = obj["metadata"].get("labels") or {}
            raw = (obj["metadata"].get("annotations") or {}).get(ANNOTATION_HOST_PORT)
            try:
                port, index = int(str(raw)), int(str(labels.get(LABEL_REPLICA_INDEX)))
            except ValueError:
                continue
            self.ports.adopt(self.uid, str(labels.get(LABEL_REPLICA_TYPE)), index, port)

    # ---- limits (backoffLimit, activeDeadlineSeconds)

    def _limit_failure(self, pods: list[JsonDict], active_pods: list[JsonDict]) -> str | None:
        backoff = self.run_policy.get("backoffLimit")
        if backoff is not None:
            failed = sum(1 for p in pods if p.get("status", {}).get("phase") == "Failed")
            total = sum(max(int(s.get("replicas", 1)), 0) for s in self.replicas.values())
            previous_failed = sum(
                counts(self.status, rt)[2] for rt in self.status.get("replicaStatuses") or {}
            )
            # NumRequeues of the operator's FakeWorkQueue is always 0.
            exceeds = failed > previous_failed and len(active_pods) != total and 1 > int(backoff)
            if exceeds or self._past_backoff_limit(pods, int(backoff)):
                return f"Job {self.name} has failed because it has reached the specified backoff limit"
        deadline = self.run_policy.get("activeDeadlineSeconds")
        start = parse_time(self.status.get("startTime"))
        if deadline is not None and start is not None and now_seconds() - start >= int(deadline):
            return f"Job {self.name} has failed because it was active longer than specified deadline"
        return None

    def _past_backoff_limit(self, pods: list[JsonDict], limit: int) -> bool:
        restarts = 0
        for rtype, rspec in self.replicas.items():
            if rspec.get("restartPolicy") not in ("OnFailure", "Always", "ExitCode"):
                continue
            for pod in pods:
                if pod["metadata"].get("labels", {}).get(LABEL_REPLICA_TYPE) != rtype.lower():
                    continue
                if pod.get("status", {}).get("phase") != "Running":
                    continue
                for group in ("initContainerStatuses", "containerStatuses"):
                    for cs in pod["status"].get(group) or []:
                        restarts += int(cs.get("restartCount", 0))
        return restarts > 0 if limit == 0 else restarts >= limit

    def _deadline_remaining(self) -> float | None:
        deadline = self.run_policy.get("activeDeadlineSeconds")
        start = parse_time(self.status.get("startTime"))
        if deadline is None or start is None or is_finished(self.status):
            return None
        return start + int(deadline) - now_seconds()

    # ---- cleanup (DeletePodsAndServices, CleanupJob)

    def _delete_pods_and_services(self, pods: list[JsonDict]) -> None:
        if not pods:
            return
        policy = self.run_policy.get("cleanPodPolicy")
        finished = is_finished(self.status)
        if finished and policy == "None":
            return
        for pod in pods:
            phase = pod.get("status", {}).get("phase")
            if finished and policy == "Running" and phase not in ("Running", "Pending"):
                continue
            self._delete("pods", pod["metadata"]["name"], "Pod", "pod")
            self._delete("services", pod["metadata"]["name"], "Service", "service")

    def _delete(self, rtype: str, name: str, kind: str, noun: str) -> None:
        try:
            current = self.store.get(rtype, self.namespace, name)
        except ApiError as exc:
            if exc.code == 404:
                return
            raise
        if current["metadata"].get("deletionTimestamp"):
            return  # already terminating: the operator skips it
        try:
            self.store.delete(rtype, self.namespace, name)
        except ApiError as exc:
            if exc.code == 404:
                return
            self.event("Warning", f"FailedDelete{kind}", f"Error deleting: {exc.message}")
            raise ReconcileError(exc.message) from exc
        self.event("Normal", f"SuccessfulDelete{kind}", f"Deleted {noun}: {name}")

    def _cleanup_job(self) -> bool:
        """TTL: True when the job was deleted."""
        remaining = self._ttl_remaining()
        if remaining is None or remaining >= 0:
            return False
        try:
            self.store.delete(self.plural, self.namespace, self.name)
        except ApiError as exc:
            if exc.code == 404:
                return True
            self.event("Warning", "FailedDeleteJob", f"Error deleting: {exc.message}")
            raise ReconcileError(exc.message) from exc
        self.event("Normal", "SuccessfulDeleteJob", f"Deleted job: {self.name}")
        return True

    def _ttl_remaining(self) -> float | None:
        ttl = self.run_policy.get("ttlSecondsAfterFinished")
        if ttl is None or self.run_policy.get("suspend") is True or not is_finished(self.status):
            return None
        completion = parse_time(self.status.get("completionTime"))
        if completion is None:
            return None
        # CleanupJob deletes once now is strictly after the expiry; -0.0 marks "expired now".
        remaining = completion + int(ttl) - now_seconds()
        return remaining if remaining > 0 else -1.0

    # ---- pods (ReconcilePods: the same rules for every kind)

    def _reconcile_pods(self, pods: list[JsonDict], rtype: str) -> None:
        rspec = self.replicas[rtype]
        n = max(int(rspec.get("replicas", 1)), 0)
        self.status.setdefault("replicaStatuses", {})[rtype] = {}
        for index, slice_ in enumerate(replica_slices(pods, rtype, n)):
            if len(slice_) > 1:
                log.warning("too many pods for %s/%s %s %d", self.namespace, self.name, rtype, index)
                continue
            if not slice_:
                self._create_pod(rtype, index, rspec)
                continue
            pod = slice_[0]
            pname = pod["metadata"]["name"]
            if index >= n:
                self._delete("pods", pname, "Pod", "pod")
            exit_code = 0xBEEF
            code = container_exit_code(pod, self.container_name)
            if code is not None:
                exit_code = code
                self.event(
                    "Normal", "ExitedWithCode", f"Pod: {self.namespace}.{pname} exited with code {code}"
                )
            phase = pod.get("status", {}).get("phase")
            if rspec.get("restartPolicy") == "ExitCode" and phase == "Failed":
                if is_retryable_exit_code(exit_code):
                    self._delete("pods", pname, "Pod", "pod")
                    msg = f"job {self.name} is restarting because {rtype} replica(s) failed."
                    self.event("Warning", f"{self.kind}Restarting", msg)
                    set_condition(self.status, "Restarting", "True", f"{self.kind}Restarting", msg)
                else:
                    msg = f'job "{self.name}" is failing because "{rtype}" replica(s) failed.'
                    self.event("Warning", f"{self.kind}Failed", msg)
                    set_condition(self.status, "Failed", "True", f"{self.kind}Failed", msg)
            update_replica_status(self.status, rtype, pod)

    def _create_pod(self, rtype: str, index: int, rspec: JsonDict) -> None:
        rt = rtype.lower()
        template = copy.deepcopy(rspec.get("template") or {})
        tmeta = template.get("metadata") or {}
        pod_spec = template.get("spec") or {}
        name = f"{self.name}-{rt}-{index}".replace("/", "-")
        labels = dict(tmeta.get("labels") or {})
        labels.update(self._labels(rt, index))
        if self.is_master_role(rtype, index):
            labels[LABEL_JOB_ROLE] = "master"
        port = self.ports.port(self.uid, rt, index)
        annotations = dict(tmeta.get("annotations") or {})
        annotations[ANNOTATION_HOST_PORT] = str(port)
        self.set_cluster_spec(pod_spec, rt, index)
        if pod_spec.get("restartPolicy"):
            self.event(
                "Warning",
                "SetPodTemplateRestartPolicy",
                "Restart policy in pod template will be overwritten by restart policy in replica spec",
            )
        policy = rspec.get("restartPolicy")
        pod_spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy
        metadata: JsonDict = {
            "name": name,
            "namespace": self.namespace,
            "labels": labels,
            "annotations": annotations,
        }
        if tmeta.get("finalizers"):
            metadata["finalizers"] = list(tmeta["finalizers"])
        metadata["ownerReferences"] = [self._owner_ref()]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
        self._create_recorded("pods", "Pod", pod)

    def _create_recorded(self, rtype: str, kind: str, obj: JsonDict) -> None:
        """Create a pod or service as the operator's PodControl / ServiceControl do: with an event,
        Successful or Failed; a failure ends this reconcile (it is retried with backoff)."""
        try:
            self.store.create(rtype, self.namespace, obj)
        except ApiError as exc:
            self.event("Warning", f"FailedCreate{kind}", f"Error creating: {exc.message}")
            raise ReconcileError(exc.message) from exc
        self.event("Normal", f"SuccessfulCreate{kind}", f"Created {kind.lower()}: {obj['metadata']['name']}")


    def _labels(self, rt: str, index: int) -> dict[str, str]:
        return {
            LABEL_OPERATOR_NAME: self.controller_name,
            LABEL_JOB_NAME: self.name.replace("/", "-"),
            LABEL_REPLICA_TYPE: rt,
            LABEL_REPLICA_INDEX: str(index),
        }

    def _owner_ref(self) -> JsonDict:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    # ---- services (common/service.go ReconcileServices)

    def _reconcile_services(self, services: list[JsonDict], rtype: str) -> None:
        rspec = self.replicas[rtype]
        n = max(int(rspec.get("replicas", 1)), 0)
        for index, slice_ in enumerate(replica_slices(services, rtype, n)):
            if len(slice_) > 1:
                continue
            if not slice_:
                self._create_service(rtype, index, rspec)
            elif index >= n:
                self._delete("services", slice_[0]["metadata"]["name"], "Service", "service")

    def _create_service(self, rtype: str, index: int, rspec: JsonDict) -> None:
        rt = rtype.lower()
        name = f"{self.name}-{rt}-{index}".replace("/", "-")
        labels = self._labels(rt, index)
        host_port = self.ports.port(self.uid, rt, index)
        ports = []
        for cport in self._container_ports(rspec):
            sport: JsonDict = {"name": cport.get("name", ""), "port": cport.get("containerPort")}
            if cport.get("name") == self.port_name:
                sport["targetPort"] = host_port
            ports.append(sport)
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": labels,
                "annotations": {ANNOTATION_HOST_PORT: str(host_port)},
                "ownerReferences": [self._owner_ref()],
            },
            "spec": {"clusterIP": "None", "selector": dict(labels), "ports": ports},
        }
        self._create_recorded("services", "Service", service)

    # ---- writing

    def _write_if_changed(self) -> None:
        if normalise(self.status) != self.old:
            self._write()

    def _write(self) -> None:
        try:
            self.store.update_status(self.plural, self.namespace, self.name, normalise(self.status))
        except ApiError as exc:
            if exc.code != 404:
                raise

    def _container_ports(self, rspec: JsonDict) -> list[JsonDict]:
        for container in (rspec.get("template") or {}).get("spec", {}).get("containers") or []:
            if container.get("name") == self.container_name:
                return sorted(container.get("ports") or [], key=lambda p: str(p.get("name", "")))
        return []
