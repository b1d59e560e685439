"""What a cluster with Kubeflow Trainer v2.3.0 and JobSet v0.12.0 checks and defaults before it stores
their objects (docs/reference/trainjob-behaviour.md §2, §5.1, §5.6), in the API server's order:

1. CRD defaults and CRD schema/CEL rules: HTTP 422 Invalid (TrainJob name as an RFC 1035 label of at most
   63 characters, runtimeRef required, managedBy's two values, activeDeadlineSeconds >= 1, storageUri a
   URI, immutable runtimeRef/initializer/trainer/activeDeadlineSeconds/managedBy);
2. the validating webhooks: HTTP 403 `admission webhook "<name>" denied the request: <errors>`
   (TrainJob: the runtime exists, the torch and XGBoost reserved env, initializer jobs for initializers,
   runtimePatches only while suspended; runtimes: ancestor replicated jobs have 1 replica and the
   required container); JobSet's webhook answers 422 (generated names within 63 characters, no
   dependsOn on the first job), and so does the API server for a Job with a negative count.
The JobSet webhook's defaults (`jobSetWebhook.Default`) are written here too (`default_jobset`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from airflow_tfjob.local import warnings
from airflow_tfjob.local.resources import RESOURCES, TRAINER_GROUP, ApiError, JsonDict, invalid
from airflow_tfjob.local.trainbuild import (
    ANCESTOR,
    TORCH_RESERVED,
    XGBOOST_RESERVED,
    ancestor_of,
    find_container,
)

if TYPE_CHECKING:
    from airflow_tfjob.local.store import Store

MANAGED_BY_VALUES = ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")
DEPRECATED_URL = "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
IMMUTABLE = ("runtimeRef", "initializer", "trainer", "activeDeadlineSeconds", "managedBy")


def default_jobset(js: JsonDict) -> None:
    """jobSetWebhook.Default plus the CRD defaults of JobSet v0.12.0 (§5.1)."""
    spec = js.setdefault("spec", {})
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    network = spec.setdefault("network", {})
    network.setdefault("enableDNSHostnames", True)
    network.setdefault("publishNotReadyAddresses", True)
    for rjob in spec.get("replicatedJobs") or []:
        rjob.setdefault("replicas", 1)
        rjob.setdefault("groupName", "default")
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        job_spec.setdefault("completionMode", "Indexed")
        pod = job_spec.setdefault("template", {}).setdefault("spec", {})
        if not pod.get("restartPolicy"):
            pod["restartPolicy"] = "OnFailure"
    for j, rule in enumerate((spec.get("failurePolicy") or {}).get("rules") or []):
        rule.setdefault("name", f"failurePolicyRule{j}")


def _jobset_errors(js: JsonDict) -> list[tuple[str, str, str]]:
    """JobSet's ValidateCreate: returned as apierrors.NewInvalid, so a 422 (§5.6)."""
    name = js["metadata"]["name"]
    errors: list[tuple[str, str, str]] = []
    for i, rjob in enumerate((js.get("spec") or {}).get("replicatedJobs") or []):
        job = f"{name}-{rjob.get('name')}-{int(rjob.get('replicas', 1)) - 1}"
        path = f"spec.replicatedJobs[{i}].name"
        completions = ((rjob.get("template") or {}).get("spec") or {}).get("completions")
        if len(job) > 63 or not _DNS1035.match(job):
            errors.append((path, "FieldValueInvalid", f'Invalid value: "{job}": JobSet name is too long, job names '
                           "generated for this JobSet will exceed 63 characters"))
        elif completions and len(f"{job}-{int(completions) - 1}-abcde") > 63:
            errors.append((path, "FieldValueInvalid", f'Invalid value: "{job}": JobSet name is too long, pod names '
                           "generated for this JobSet will exceed 63 characters"))
        if i == 0 and rjob.get("dependsOn"):
            errors.append(("spec.replicatedJobs[0].dependsOn", "FieldValueInvalid",
                           "Invalid value: ...: DependsOn can't be set for the first ReplicatedJob"))
    return errors


def _job_errors(job: JsonDict) -> list[tuple[str, str, str]]:
    """The API server's own Job validation, as far as a TrainJob's numNodes can reach it (§2.4)."""
    spec = job.get("spec") or {}
    return [(f"spec.{key}", "FieldValueInvalid", f"Invalid value: {spec[key]}: must be greater than or equal to 0")
            for key in ("parallelism", "completions", "backoffLimit")
            if isinstance(spec.get(key), int) and spec[key] < 0]


def _crd_errors(tj: JsonDict, old: JsonDict | None) -> list[tuple[str, str, str]]:
    name = tj["metadata"].get("name", "")
    spec = tj.get("spec")
    errors: list[tuple[str, str, str]] = []
    if not _DNS1035.match(name):
        errors.append(("<nil>", "FieldValueInvalid", "Invalid value: \"object\": metadata.name must match RFC 1035 "
                       "DNS label format"))
    if len(name) > 63:
        errors.append(("<nil>", "FieldValueInvalid", "Invalid value: \"object\": metadata.name must be no more "
                       "than 63 characters"))
    if not isinstance(spec, dict):
        return [*errors, ("spec", "FieldValueRequired", "Required value")]
    ref = spec.get("runtimeRef")
    if not isinstance(ref, dict):
        errors.append(("spec.runtimeRef", "FieldValueRequired", "Required value"))
    elif not ref.get("name"):
        errors.append(("spec.runtimeRef.name", "FieldValueRequired", "Required value"))
    if spec.get("managedBy") not in MANAGED_BY_VALUES:
        errors.append(("spec.managedBy", "FieldValueInvalid", f'Invalid value: "string": ManagedBy must be '
                       f"{MANAGED_BY_VALUES[0]} or {MANAGED_BY_VALUES[1]} if set"))
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not isinstance(deadline, int) or deadline < 1):
        errors.append(("spec.activeDeadlineSeconds", "FieldValueInvalid",
                       f"Invalid value: {deadline}: spec.activeDeadlineSeconds in body should be greater than or "
                       "equal to 1"))
    for which in ("dataset", "model"):
        uri = ((spec.get("initializer") or {}).get(which) or {}).get("storageUri")
        if uri and not _URI.match(str(uri)):
            errors.append((f"spec.initializer.{which}.storageUri", "FieldValueInvalid",
                           'Invalid value: "string": storageUri may be empty, or it must be a valid URI '
                           "(scheme://...)"))
    old_spec = (old or {}).get("spec") or {}
    for key in IMMUTABLE:
        if old is not None and key in old_spec and key in spec and old_spec[key] != spec[key]:
            errors.append((f"spec.{key}", "FieldValueInvalid", 'Invalid value: "object": field is immutable'))
    return errors


class TrainAdmission:
    """The admission of trainjobs, the two runtime kinds and jobsets; needs the store to find runtimes."""

    def __init__(self) -> None:
        self.store: Store | None = None

    def admit(self, rtype: str, operation: str, obj: JsonDict, old: JsonDict | None) -> None:
        causes: list[tuple[str, str, str]] = []
        if rtype == "jobsets":
            default_jobset(obj)
            causes = _jobset_errors(obj) if old is None else []
        elif rtype == "jobs":
            causes = _job_errors(obj)
        if causes:
            raise invalid(RESOURCES[rtype], obj["metadata"].get("name", ""), causes)
        if rtype in ("jobsets", "jobs"):
            return
        if rtype == "trainjobs":
            self._trainjob(obj, old)
        elif rtype in ("trainingruntimes", "clustertrainingruntimes") and (operation == "CREATE" or rtype[0] == "c"):
            labels = obj["metadata"].get("labels") or {}
            if labels.get("trainer.kubeflow.org/webhook-validation") == "disabled":
                return
            singular = RESOURCES[rtype].singular
            self._deny(f"validator.{singular}.trainer.kubeflow.org", self._runtime_errors(obj))
            if rtype[0] == "c" and labels.get("trainer.kubeflow.org/support") == "deprecated":
                warnings.add(f'ClusterTrainingRuntime "{obj["metadata"]["name"]}" is deprecated and will be removed '
                             f"in a future release of Kubeflow Trainer. See runtime deprecation policy: {DEPRECATED_URL}")

    @staticmethod
    def _deny(webhook: str, errors: list[str]) -> None:
        if errors:
            text = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
            raise ApiError(403, "Forbidden", f'admission webhook "{webhook}" denied the request: {text}')

    def _trainjob(self, tj: JsonDict, old: JsonDict | None) -> None:
        spec = tj.setdefault("spec", {})
        if isinstance(spec, dict):
            ref = spec.get("runtimeRef")
            if isinstance(ref, dict):
                ref.setdefault("apiGroup", TRAINER_GROUP)
                ref.setdefault("kind", "ClusterTrainingRuntime")
            spec.setdefault("suspend", False)
            spec.setdefault("managedBy", MANAGED_BY_VALUES[0])
        errors = _crd_errors(tj, old)
        if errors:
            raise invalid(RESOURCES["trainjobs"], tj["metadata"].get("name", ""), errors)
        self._deny("validator.trainjob.trainer.kubeflow.org", self._trainjob_errors(tj, old))

    def _trainjob_errors(self, tj: JsonDict, old: JsonDict | None) -> list[str]:
        spec = tj["spec"]
        ref = spec["runtimeRef"]
        kind, group = ref.get("kind"), ref.get("apiGroup")
        if group != TRAINER_GROUP or kind not in ("TrainingRuntime", "ClusterTrainingRuntime"):
            return [f"unsupported runtime: {kind}.{group}"]
        assert self.store is not None
        cluster = kind == "ClusterTrainingRuntime"
        try:
            runtime = self.store.get("clustertrainingruntimes" if cluster else "trainingruntimes",
                                     None if cluster else tj["metadata"]["namespace"], ref["name"])
        except ApiError as exc:
            path, which = ("spec.RuntimeRef", "clusterTrainingRuntime") if cluster else ("spec.runtimeRef",
                                                                                         "trainingRuntime")
            return [f"{path}: Invalid value: ...: {exc.message}: specified {which} must be created before the "
                    "TrainJob is created"]
        labels = runtime["metadata"].get("labels") or {}
        if cluster and labels.get("trainer.kubeflow.org/support") == "deprecated":
            warnings.add(f'Referenced ClusterTrainingRuntime "{ref["name"]}" is deprecated and will be removed in '
                         f"a future release of Kubeflow Trainer. See runtime deprecation policy: {DEPRECATED_URL}")
        errors: list[str] = []
        rspec = runtime.get("spec") or {}
        rjobs = ((rspec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
        for which in ("dataset", "model"):
            if not (spec.get("initializer") or {}).get(which):
                continue
            role = f"{which}-initializer"
            rjob = next((r for r in rjobs if r.get("name") == role), None)
            container = find_container(rjob, role) if rjob is not None else None
            if rjob is None:
                errors.append(f"spec.runtimeRef: Invalid value: ...: must have {role} job when trainJob is "
                              f"configured with input {which}Config")
            elif container is None:
                errors.append(f"spec.runtimeRef: Invalid value: ...: must have container with name - {role} in "
                              f"the {role} job")
            elif not any(m.get("name") == "initializer" for m in container.get("volumeMounts") or []):
                errors.append(f"spec.runtimeRef: Invalid value: ...: must have volumeMount with name - initializer "
                              f"in container {role} of the {role} job")
        env = [e.get("name") for e in (spec.get("trainer") or {}).get("env") or []]
        policy = rspec.get("mlPolicy") or {}
        if "torch" in policy:
            bad = sorted(n for n in env if n in TORCH_RESERVED)
            if bad:
                errors.append(f"spec.trainer.env: Invalid value: ...: must not have reserved envs, invalid envs "
                              f"configured: [{' '.join(bad)}]")
        if "xgboost" in policy:
            errors += [f"spec.trainer.env[{i}]: Forbidden: {n} is reserved for the XGBoost runtime"
                       for i, n in enumerate(env) if n in XGBOOST_RESERVED]
        if old is not None and (old.get("spec") or {}).get("runtimePatches") != spec.get("runtimePatches"):
            errors += self._patch_errors(tj, old)
        return errors

    def _patch_errors(self, tj: JsonDict, old: JsonDict) -> list[str]:
        """runtimePatches change only while suspended, and not while a JobSet replicated job is active."""
        if not (old.get("spec") or {}).get("suspend") and not tj["spec"].get("suspend"):
            return ["spec.runtimePatches: Forbidden: RuntimePatches can only be modified when the TrainJob is "
                    "suspended before or after the update"]
        assert self.store is not None
        try:
            jobset = self.store.get("jobsets", tj["metadata"]["namespace"], tj["metadata"]["name"])
        except ApiError:
            return []
        return [f"spec.runtimePatches: Forbidden: RuntimePatches cannot be modified when the JobSet's "
                f"ReplicatedJob {s.get('name')} is still active"
                for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or [] if int(s.get("active", 0)) > 0]

    @staticmethod
    def _runtime_errors(runtime: JsonDict) -> list[str]:
        errors = []
        rjobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
        required = {"trainer": "node", "dataset-initializer": "dataset-initializer",
                    "model-initializer": "model-initializer"}
        for i, rjob in enumerate(rjobs):
            role = ancestor_of(rjob)
            if role not in required:
                continue
            base = f"spec.template.spec.replicatedJobs[{i}]"
            if int(rjob.get("replicas", 1)) != 1:
                errors.append(f"{base}.replicas: Invalid value: {rjob.get('replicas')}: always must be 1")
            if find_container(rjob, required[role]) is None:
                errors.append(f"{base}.template.spec.template.spec.containers: Invalid value: ...: must contain "
                              f"the required container for the ancestor: {role}")
        return errors


__all__ = ["ANCESTOR", "TrainAdmission", "default_jobset"]
