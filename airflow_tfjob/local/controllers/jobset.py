"""The JobSet controller (jobset.x-k8s.io/v1alpha2, JobSet v0.12.0) as Trainer v2 uses it: one Job
`<jobset>-<rJob>-<i>` per replica of each replicated job, labelled and annotated as `labelAndAnnotateObject`
does, created once its `dependsOn` are reached; the headless Service `<subdomain>`; suspend and resume of
the Jobs; Failed (`FailedJobs`) as soon as one Job fails, checked before Completed (`AllJobsCompleted`,
success policy All or Any over the target replicated jobs); on finishing, the still-active Jobs are deleted
(foreground, so their pods go too); `replicatedJobsStatus` as Job counts, ordered by name descending. A
JobSet whose `spec.managedBy` names another controller (Kueue's MultiKueue on a manager cluster) is left
alone: no Jobs, no Service, no status of its own (managedByExternalController).
docs/reference/trainjob-behaviour.md §5. Not reproduced: failurePolicy restarts (a failure policy's rules
and maxRestarts are ignored: any failed Job fails the JobSet), startupPolicy InOrder, coordinator,
volumeClaimPolicies and ttlSecondsAfterFinished (see docs/local-cluster.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging

from airflow_tfjob.local.controllers.reconciler import (
    HostPortReconciler,
    condition,
    is_true,
    owner_reference,
    set_condition,
)
from airflow_tfjob.local.model.resources import ApiError, JsonDict, clone, now_rfc3339
from airflow_tfjob.local.node.localnet import ANNOTATION_HOST_PORTS
from airflow_tfjob.local.store.events import record_event

log = logging.getLogger(__name__)

P = "jobset.sigs.k8s.io/"
JOBSET_NAME = P + "jobset-name"
RJOB_NAME = P + "replicatedjob-name"
COMPONENT = "jobset-controller"
#: jobset.JobSetControllerName: the managedBy value (or none) this controller acts on.
CONTROLLER_NAME = "jobset.sigs.k8s.io/jobset-controller"


def rjob_count(rjob: JsonDict) -> int:
    """Pods of one Job of a replicated job (completions, else parallelism, else 1)."""
    spec = (rjob.get("template") or {}).get("spec") or {}
    return int(spec.get("completions") or spec.get("parallelism") or 1)


def subdomain_of(jobset: JsonDict) -> str:
    return str(((jobset.get("spec") or {}).get("network") or {}).get("subdomain") or jobset["metadata"]["name"])


def job_state(job: JsonDict) -> str:
    status = job.get("status") or {}
    if is_true(status, "Failed"):
        return "failed"
    if is_true(status, "Complete"):
        return "succeeded"
    return "active"


class JobSetController(HostPortReconciler):
    plural = "jobsets"
    owns = ("jobs",)

    def reconcile(self, namespace: str, name: str) -> float | None:
        js = self.get("jobsets", namespace, name)
        if js is None or js["metadata"].get("deletionTimestamp"):
            return None
        spec = js.get("spec") or {}
        if spec.get("managedBy") not in (None, CONTROLLER_NAME):
            return None
        status = clone(js.get("status") or {})
        status.setdefault("restarts", 0)  # `json:"restarts"` without omitempty: always written
        now = now_rfc3339()
        jobs = self.owned("jobs", js)
        by_state: dict[str, list[JsonDict]] = {"active": [], "succeeded": [], "failed": []}
        for job in jobs:
            by_state[job_state(job)].append(job)
        finished = is_true(status, "Completed") or is_true(status, "Failed")
        if not finished:
            self._ensure_service(js)
            failed = sorted(by_state["failed"], key=lambda j: (condition(j.get("status") or {}, "Failed")
                                                                or {}).get("lastTransitionTime", ""))
            if failed:
                first = failed[0]["metadata"]["name"]
                self._finish(js, status, "Failed", "FailedJobs",
                             f"jobset failed due to one or more job failures (first failed job: {first})", now)
            elif self._succeeded(spec, by_state["succeeded"]):
                self._finish(js, status, "Completed", "AllJobsCompleted", "jobset completed successfully", now)
            else:
                self._suspend_or_resume(js, status, by_state["active"], now)
                status["replicatedJobsStatus"] = self._rjob_statuses(spec, jobs)
                jobs += self._create_missing(js, jobs, status["replicatedJobsStatus"])
        if is_true(status, "Completed") or is_true(status, "Failed"):
            for job in by_state["active"]:  # JobSet deletes what still runs once it has finished
                with contextlib.suppress(ApiError):
                    self.store.delete("jobs", namespace, job["metadata"]["name"], "Foreground")
        status["replicatedJobsStatus"] = self._rjob_statuses(spec, self.owned("jobs", js))
        self.write_status("jobsets", js, status)
        return None

    # ---- outcome

    @staticmethod
    def _succeeded(spec: JsonDict, succeeded: list[JsonDict]) -> bool:
        policy = spec.get("successPolicy") or {}
        targets = policy.get("targetReplicatedJobs") or [r.get("name") for r in spec.get("replicatedJobs") or []]
        done = [j for j in succeeded if (j["metadata"].get("labels") or {}).get(RJOB_NAME) in targets]
        if policy.get("operator") == "Any":
            return bool(done)
        expected = sum(int(r.get("replicas", 1)) for r in spec.get("replicatedJobs") or [] if r.get("name") in targets)
        return len(done) >= expected

    def _finish(self, js: JsonDict, status: JsonDict, type_: str, reason: str, message: str, now: str) -> None:
        set_condition(status, type_, "True", reason, message, now)
        status["terminalState"] = type_
        record_event(self.store, js, "Warning" if type_ == "Failed" else "Normal", reason, message, COMPONENT)

    def _suspend_or_resume(self, js: JsonDict, status: JsonDict, active: list[JsonDict], now: str) -> None:
        suspend = bool((js.get("spec") or {}).get("suspend"))
        rjobs = {r.get("name"): r for r in (js.get("spec") or {}).get("replicatedJobs") or []}
        for job in active:
            if bool((job.get("spec") or {}).get("suspend")) != suspend:
                change: JsonDict = {"suspend": suspend}
                rjob = rjobs.get((job["metadata"].get("labels") or {}).get(RJOB_NAME))
                if not suspend and rjob is not None:
                    change["template"] = _resumed_template(job, rjob)
                with contextlib.suppress(ApiError):
                    self.store.patch("jobs", job["metadata"]["namespace"], job["metadata"]["name"],
                                     {"spec": change}, "merge")
        if suspend:
            set_condition(status, "Suspended", "True", "SuspendedJobs", "jobset is suspended", now)
        elif is_true(status, "Suspended"):
            set_condition(status, "Suspended", "False", "ResumeJobs", "jobset is resumed", now)

    @staticmethod
    def _rjob_statuses(spec: JsonDict, jobs: list[JsonDict]) -> list[JsonDict]:
        out = []
        for rjob in spec.get("replicatedJobs") or []:
            mine = [j for j in jobs if (j["metadata"].get("labels") or {}).get(RJOB_NAME) == rjob.get("name")]
            active = [j for j in mine if job_state(j) == "active"]

            def ready(job: JsonDict) -> bool:
                st, sp = job.get("status") or {}, job.get("spec") or {}
                need = min(int(sp.get("parallelism", 1)), int(sp.get("completions") or sp.get("parallelism", 1)))
                return int(st.get("succeeded", 0)) + int(st.get("ready", 0)) >= need

            out.append({
                "name": rjob.get("name"),
                "ready": sum(1 for j in active if ready(j)),
                "succeeded": sum(1 for j in mine if job_state(j) == "succeeded"),
                "failed": sum(1 for j in mine if job_state(j) == "failed"),
                "active": sum(1 for j in active if int((j.get("status") or {}).get("active", 0)) > 0),
                "suspended": sum(1 for j in active if (j.get("spec") or {}).get("suspend")),
            })
        return sorted(out, key=lambda s: str(s["name"]), reverse=True)

    # ---- children

    def _ensure_service(self, js: JsonDict) -> None:
        meta = js["metadata"]
        name = subdomain_of(js)
        if self.get("services", meta["namespace"], name) is not None:
            return
        network = (js.get("spec") or {}).get("network") or {}
        svc = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": name, "namespace": meta["namespace"], "ownerReferences": [owner_reference(js)]},
               "spec": {"clusterIP": "None", "selector": {JOBSET_NAME: meta["name"]},
                        "publishNotReadyAddresses": bool(network.get("publishNotReadyAddresses", True))}}
        try:
            self.store.create("services", meta["namespace"], svc)
        except ApiError as exc:
            if exc.code != 409:
                record_event(self.store, js, "Warning", "HeadlessServiceCreationFailed", exc.message, COMPONENT)
                raise

    def _create_missing(self, js: JsonDict, jobs: list[JsonDict], statuses: list[JsonDict]) -> list[JsonDict]:
        meta, spec = js["metadata"], js.get("spec") or {}
        existing = {j["metadata"]["name"] for j in jobs}
        by_name = {s["name"]: s for s in statuses}
        rjobs = spec.get("replicatedJobs") or []
        replicas = {r.get("name"): int(r.get("replicas", 1)) for r in rjobs}
        ports = self._host_ports(js)
        created: list[JsonDict] = []
        global_index = 0
        group_index: dict[str, int] = {}
        for rjob in rjobs:
            rname, group = str(rjob.get("name")), str(rjob.get("groupName") or "default")
            reached = all(_dependency_reached(by_name.get(d.get("name"), {}), d.get("status"), replicas.get(d.get("name"), 1))
                          for d in rjob.get("dependsOn") or [])
            for index in range(replicas[rname]):
                gindex, grp_index = global_index, group_index.get(group, 0)
                global_index += 1
                group_index[group] = grp_index + 1
                job_name = f"{meta['name']}-{rname}-{index}"
                if job_name in existing or not reached:
                    continue
                labels = {
                    JOBSET_NAME: meta["name"], P + "jobset-uid": meta["uid"], RJOB_NAME: rname,
                    P + "restart-attempt": str((js.get("status") or {}).get("restarts", 0)),
                    P + "replicatedjob-replicas": str(replicas[rname]),
                    P + "global-replicas": str(sum(replicas.values())), P + "job-index": str(index),
                    P + "job-key": hashlib.sha1(f"{meta['namespace']}/{job_name}".encode()).hexdigest(),
                    P + "job-global-index": str(gindex), P + "group-name": group,
                    P + "group-replicas": str(sum(int(r.get("replicas", 1)) for r in rjobs
                                                  if str(r.get("groupName") or "default") == group)),
                    P + "job-group-index": str(grp_index),
                }
                created.append(self._create_job(js, rjob, job_name, labels, ports))
        return created

    def _create_job(self, js: JsonDict, rjob: JsonDict, name: str, labels: dict[str, str],
                    ports: dict[str, int]) -> JsonDict:
        meta, spec = js["metadata"], js.get("spec") or {}
        template = clone(rjob.get("template") or {})
        tmeta = template.get("metadata") or {}
        job_spec = template.get("spec") or {}
        job_spec["suspend"] = bool(spec.get("suspend"))
        pod_template = job_spec.setdefault("template", {})
        pmeta = pod_template.setdefault("metadata", {})
        pmeta["labels"] = {**(pmeta.get("labels") or {}), **labels}
        pmeta["annotations"] = {**(pmeta.get("annotations") or {}), **labels}
        if ((spec.get("network") or {}).get("enableDNSHostnames", True)):
            pod_template.setdefault("spec", {})["subdomain"] = subdomain_of(js)
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": name, "namespace": meta["namespace"],
                            "labels": {**(tmeta.get("labels") or {}), **labels},
                            "annotations": {**(tmeta.get("annotations") or {}), **labels,
                                            ANNOTATION_HOST_PORTS: json.dumps(ports, sort_keys=True)},
                            "ownerReferences": [owner_reference(js)]},
               "spec": job_spec}
        try:
            return self.store.create("jobs", meta["namespace"], job)
        except ApiError as exc:
            record_event(self.store, js, "Warning", "JobCreationFailed", exc.message, COMPONENT)
            raise

    def _host_ports(self, js: JsonDict) -> dict[str, int]:
        """A free 127.0.0.1 port per pod of the JobSet, by hostname (localnet.py)."""
        uid, name = js["metadata"]["uid"], js["metadata"]["name"]
        ports: dict[str, int] = {}
        for rjob in (js.get("spec") or {}).get("replicatedJobs") or []:
            for index in range(int(rjob.get("replicas", 1))):
                for pod in range(rjob_count(rjob)):
                    ports[f"{name}-{rjob.get('name')}-{index}-{pod}"] = self.ports.port(uid, f"{rjob.get('name')}-{index}", pod)
        return ports


def _resumed_template(job: JsonDict, rjob: JsonDict) -> JsonDict:
    """What resumeJobsIfNecessary carries from the replicated job into a suspended Job's pod template on
    resume (runtime patches applied while suspended, e.g. by Kueue): labels and annotations merged,
    nodeSelector, tolerations and schedulingGates replaced."""
    current = ((job.get("spec") or {}).get("template") or {})
    wanted = (((rjob.get("template") or {}).get("spec") or {}).get("template") or {})
    meta, wanted_meta = current.get("metadata") or {}, wanted.get("metadata") or {}
    change: JsonDict = {"metadata": {key: {**(meta.get(key) or {}), **(wanted_meta.get(key) or {})}
                                     for key in ("labels", "annotations")}}
    spec = wanted.get("spec") or {}
    change["spec"] = {key: spec.get(key) for key in ("nodeSelector", "tolerations", "schedulingGates")}
    return change


def _dependency_reached(status: JsonDict, wanted: object, replicas: int) -> bool:
    """dependsOn (AND over the list): `Complete` when all the dependency's Jobs succeeded, `Ready` when all
    are ready or finished (J `depends_on.go` dependencyReachedStatus)."""
    if not status:
        return False
    if wanted == "Ready":
        return int(status.get("ready", 0)) + int(status.get("succeeded", 0)) + int(status.get("failed", 0)) >= replicas
    return int(status.get("succeeded", 0)) >= replicas
