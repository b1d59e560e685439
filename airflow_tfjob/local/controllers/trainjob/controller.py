"""The TrainJob controller of Kubeflow Trainer v2.3.0 (`TrainJobReconciler.Reconcile`,
docs/reference/trainjob-behaviour.md §3.1, §6): skip a TrainJob managed by someone else; drop a Failed
condition that is not DeadlineExceeded (re-derived from the JobSet each pass); find the runtime
(TrainingRuntime in the TrainJob's namespace or ClusterTrainingRuntime, by `runtimeRef.kind`), snapshot
it in the ConfigMap `<tj>-runtime-snapshot` (so later runtime edits do not change the job); while not
finished, create the JobSet, or re-apply it when it or the TrainJob is suspended; then the conditions
Suspended/Resumed, Complete and Failed copied from the JobSet, `jobsStatus`, and activeDeadlineSeconds
(from creation or the last resume: Failed/DeadlineExceeded and the JobSet deleted). For an MPI runtime, the
ssh Secret and the hostfile ConfigMap beside the JobSet (model/trainermpi.py); one whose nodes run sshd fails when it
starts, its JobSet kept suspended (a local deviation, mpi.ssh_required). Status is written
only when it changed; `trainerStatus` is carried through untouched (status.py writes it).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Callable

import yaml

from airflow_tfjob.local.admission.trainjobs import default_jobset
from airflow_tfjob.local.controllers.reconciler import (
    Reconciler,
    condition,
    is_true,
    owner_reference,
    set_condition,
)
from airflow_tfjob.local.model import trainermpi as mpi
from airflow_tfjob.local.model.profiles import TrainerRules
from airflow_tfjob.local.model.resources import (
    TRAINER_GROUP,
    ApiError,
    JsonDict,
    clone,
    now_rfc3339,
    parse_rfc3339,
)
from airflow_tfjob.local.model.trainerbuild import build_jobset, mpi_slots, runtime_plural
from airflow_tfjob.local.store.core import Store
from airflow_tfjob.local.store.events import record_event

log = logging.getLogger(__name__)

MANAGED_BY = "trainer.kubeflow.org/trainjob-controller"
COMPONENT = "trainer-controller-manager"


class TrainJobController(Reconciler):
    plural = "trainjobs"
    owns = ("jobsets",)

    def __init__(self, store: Store, *, status_env: Callable[[JsonDict], list[JsonDict]] | None = None,
                 rules: TrainerRules | None = None) -> None:
        super().__init__(store)
        # With the TrainJobStatus gate: the env that points a node at the progress endpoint (status.py).
        self.status_env = status_env
        # What the profile's Trainer release changes in the JobSet it builds (model/profiles.py).
        self.rules = rules or TrainerRules()

    def reconcile(self, namespace: str, name: str) -> float | None:
        tj = self.get("trainjobs", namespace, name)
        if tj is None or tj["metadata"].get("deletionTimestamp"):
            return None
        spec = tj.get("spec") or {}
        if (spec.get("managedBy") or MANAGED_BY) != MANAGED_BY:
            return None  # e.g. Kueue MultiKueue runs it elsewhere
        status = clone(tj.get("status") or {})
        failed = condition(status, "Failed")
        if failed is not None and failed.get("reason") not in ("DeadlineExceeded", mpi.UNSUPPORTED_REASON):
            status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "Failed"]
        now = now_rfc3339()
        ref = spec.get("runtimeRef") or {}
        plural = runtime_plural(ref)
        if plural is None:
            kind = f"{ref.get('kind') or 'ClusterTrainingRuntime'}.{ref.get('apiGroup') or TRAINER_GROUP}"
            set_condition(status, "Failed", "True", "TrainingRuntimeNotSupported", f"unsupported runtime: {kind}", now)
            self.write_status("trainjobs", tj, status)
            return None
        finished = is_true(status, "Complete") or is_true(status, "Failed")
        jobset = self.get("jobsets", namespace, name)
        unsupported: str | None = None
        if not finished:
            try:
                jobset, unsupported = self._apply(tj, plural, jobset)
            except ApiError as exc:
                note = f"TrainJob resources reconciliation failed: {exc.message}"
                record_event(self.store, tj, "Warning", "TrainJobResourcesCreationFailed",
                             note[:950] + (" ..." if len(note) > 950 else ""), COMPONENT)
                raise
        if spec.get("suspend"):
            set_condition(status, "Suspended", "True", "Suspended", "TrainJob is suspended", now)
        elif condition(status, "Suspended") is not None and is_true(status, "Suspended"):
            set_condition(status, "Suspended", "False", "Resumed", "TrainJob is resumed", now)
        if unsupported is not None:
            set_condition(status, "Failed", "True", mpi.UNSUPPORTED_REASON, unsupported, now)
        if jobset is not None:
            self._from_jobset(status, jobset)
        after = self._deadline(tj, status, now)
        self.write_status("trainjobs", tj, status)
        return after

    # ---- objects

    def _runtime(self, tj: JsonDict, plural: str) -> JsonDict:
        """The runtime as snapshotted at the first reconcile (creating the snapshot if absent)."""
        meta = tj["metadata"]
        ref = tj["spec"]["runtimeRef"]
        snapshot_name = f"{meta['name']}-runtime-snapshot"
        snapshot = self.get("configmaps", meta["namespace"], snapshot_name)
        if snapshot is not None:
            runtime = yaml.safe_load((snapshot.get("data") or {}).get("runtime") or "null")
            if not isinstance(runtime, dict) or (runtime.get("metadata") or {}).get("name") != ref["name"]:
                raise ApiError(500, "InternalError", f"invalid runtime snapshot: {snapshot_name}")
            return runtime
        try:
            runtime = self.store.get(plural, meta["namespace"] if plural == "trainingruntimes" else None, ref["name"])
        except ApiError as exc:
            what = ("TrainingRuntime specified in TrainJob is not found" if plural == "trainingruntimes"
                    else "not found ClusterTrainingRuntime specified in TrainJob")
            raise ApiError(exc.code, exc.reason, f"{what}: {exc.message}") from None
        self.store.create("configmaps", meta["namespace"], {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": snapshot_name, "namespace": meta["namespace"], "ownerReferences": [owner_reference(tj)]},
            "data": {"runtime": yaml.safe_dump(runtime, sort_keys=False)},
        })
        return runtime

    def _apply(self, tj: JsonDict, plural: str, jobset: JsonDict | None) -> tuple[JsonDict | None, str | None]:
        """Create the JobSet, or re-apply it while it or the TrainJob is suspended (a running JobSet is
        never re-applied: spec changes take effect through a suspend/resume cycle). With it, the reason a
        started TrainJob cannot run here (its JobSet is then kept suspended), else None."""
        suspended = bool((tj.get("spec") or {}).get("suspend"))
        if jobset is not None and not suspended and not (jobset.get("spec") or {}).get("suspend"):
            return jobset, None
        runtime = self._runtime(tj, plural)
        env = self.status_env(tj) if self.status_env is not None else None
        wanted = build_jobset(tj, runtime, status_env=env, rules=self.rules)
        ns = tj["metadata"]["namespace"]
        policy = (runtime.get("spec") or {}).get("mlPolicy") or {}
        unsupported = None
        if "mpi" in policy:
            self._mpi_objects(tj, wanted, policy, mpi_slots(tj, runtime))
            unsupported = None if suspended else mpi.ssh_required(wanted["spec"])
            if unsupported is not None:
                wanted["spec"]["suspend"] = True
        if jobset is None:
            return self.store.create("jobsets", ns, wanted), unsupported
        default_jobset(wanted)
        if jobset.get("spec") == wanted["spec"]:
            return jobset, unsupported
        return (self.store.replace("jobsets", ns, jobset["metadata"]["name"], {**jobset, "spec": wanted["spec"]}),
                unsupported)

    def _mpi_objects(self, tj: JsonDict, wanted: JsonDict, policy: JsonDict, slots: int) -> None:
        """The MPI plugin's Secret (made once) and hostfile ConfigMap (kept up to date)."""
        ns, name = tj["metadata"]["namespace"], tj["metadata"]["name"]
        owner = owner_reference(tj)
        if self.get("secrets", ns, f"{name}{mpi.SSH_SUFFIX}") is None:
            self.store.create("secrets", ns, mpi.ssh_secret(tj, owner))
        data = mpi.hostfile_data(name, wanted["spec"], policy, slots)
        current = self.get("configmaps", ns, f"{name}{mpi.HOSTFILE_SUFFIX}")
        if current is None:
            self.store.create("configmaps", ns, mpi.hostfile_configmap(tj, owner, data))
        elif (current.get("data") or {}).get(mpi.HOSTFILE) != data:
            self.store.replace("configmaps", ns, current["metadata"]["name"], {**current, "data": {mpi.HOSTFILE: data}})

    # ---- status

    @staticmethod
    def _from_jobset(status: JsonDict, jobset: JsonDict) -> None:
        js_status = jobset.get("status") or {}
        deadline = condition(status, "Failed")
        for js_type, tj_type in (("Completed", "Complete"), ("Failed", "Failed")):
            cond = condition(js_status, js_type)
            if cond is None or cond.get("status") != "True":
                continue
            if tj_type == "Failed" and deadline is not None:
                continue  # DeadlineExceeded is kept over whatever the JobSet says
            set_condition(status, tj_type, "True", cond.get("reason", ""), cond.get("message", ""),
                          cond.get("lastTransitionTime") or now_rfc3339())
        if js_status.get("replicatedJobsStatus") is not None:
            status["jobsStatus"] = [
                {k: int(s.get(k, 0)) if k != "name" else s.get("name")
                 for k in ("name", "ready", "succeeded", "failed", "active", "suspended")}
                for s in js_status["replicatedJobsStatus"]
            ]

    def _deadline(self, tj: JsonDict, status: JsonDict, now: str) -> float | None:
        seconds = (tj.get("spec") or {}).get("activeDeadlineSeconds")
        if not seconds or is_true(status, "Complete") or is_true(status, "Failed") or is_true(status, "Suspended"):
            return None
        resumed = condition(status, "Suspended")
        start = (resumed or {}).get("lastTransitionTime") if resumed is not None else None
        begin, current = parse_rfc3339(start or tj["metadata"].get("creationTimestamp")), parse_rfc3339(now)
        if begin is None or current is None:
            return None
        left = (begin + dt.timedelta(seconds=int(seconds)) - current).total_seconds()
        if left > 0:
            return max(left, 1.0)
        set_condition(status, "Failed", "True", "DeadlineExceeded", "TrainJob exceeded its active deadline", now)
        meta = tj["metadata"]
        with contextlib.suppress(ApiError):
            self.store.delete("jobsets", meta["namespace"], meta["name"])
        return None
