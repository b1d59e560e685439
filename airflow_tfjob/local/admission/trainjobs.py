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
from datetime import datetime, timezone

from airflow_tfjob.local.admission import warnings
from airflow_tfjob.local.model.profiles import TrainerRules
from airflow_tfjob.local.model.resources import RESOURCES, TRAINER_GROUP, ApiError, JsonDict, invalid
from airflow_tfjob.local.model.trainerbuild import (
    ANCESTOR,
    LAUNCHER,
    MPI_RESERVED,
    NODE,
    PRTE_RESERVED,
    TORCH_RESERVED,
    XGBOOST_RESERVED,
    ancestor_of,
    find_container,
)
from airflow_tfjob.local.store.core import Store

MANAGED_BY_VALUES = ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")
DEPRECATED_URL = "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
IMMUTABLE = ("runtimeRef", "initializer", "trainer", "activeDeadlineSeconds", "managedBy")
MAX_ITEM = 1048576
ML_POLICIES = ("torch", "mpi", "jax", "xgboost", "flux")
FLUX_INSTALLER = "flux-installer"
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PATH = re.compile(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")


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
        # The pod template in JobSet's CRD schema carries core's defaults, e.g. a port's protocol.
        for container in [*(pod.get("containers") or []), *(pod.get("initContainers") or [])]:
            for port in container.get("ports") or []:
                port.setdefault("protocol", "TCP")
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
    tr = spec.get("trainer") or {}
    for key in ("command", "args"):
        for i, item in enumerate(tr.get(key) or []):
            if isinstance(item, str) and len(item.encode()) > MAX_ITEM:
                errors.append((f"spec.trainer.{key}[{i}]", "FieldValueTooLong",
                               f"Too long: may not be more than {MAX_ITEM} bytes"))
    errors += _grace_errors(spec, old)
    old_spec = (old or {}).get("spec") or {}
    for key in IMMUTABLE:
        if old is not None and key in old_spec and key in spec and old_spec[key] != spec[key]:
            errors.append((f"spec.{key}", "FieldValueInvalid", 'Invalid value: "object": field is immutable'))
    return errors


def _graces(spec: JsonDict) -> dict[tuple[str, str], tuple[str, object]]:
    """terminationGracePeriodSeconds in runtimePatches, keyed (manager, replicated job) as the CRD's list
    maps correlate them, with the field path."""
    found: dict[tuple[str, str], tuple[str, object]] = {}
    for i, patch in enumerate(spec.get("runtimePatches") or []):
        rjobs = ((((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {})
                 .get("replicatedJobs") or [])
        for j, rjob in enumerate(rjobs):
            pod = ((((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {})
            if "terminationGracePeriodSeconds" in pod:
                path = (f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec.replicatedJobs[{j}].template."
                        "spec.template.spec.terminationGracePeriodSeconds")
                found[(patch.get("manager"), rjob.get("name"))] = (path, pod["terminationGracePeriodSeconds"])
    return found


def _grace_errors(spec: JsonDict, old: JsonDict | None) -> list[tuple[str, str, str]]:
    """The patch's terminationGracePeriodSeconds: minimum 0, and immutable once set (a CEL transition rule)."""
    errors: list[tuple[str, str, str]] = []
    before = _graces((old or {}).get("spec") or {}) if old is not None else {}
    for key, (path, value) in _graces(spec).items():
        if isinstance(value, int) and value < 0:
            errors.append((path, "FieldValueInvalid", f"Invalid value: {value}: {path} in body should be greater "
                           "than or equal to 0"))
        if key in before and before[key][1] != value:
            errors.append((path, "FieldValueInvalid", 'Invalid value: "integer": field is immutable'))
    return errors


def _patch_rule_errors(spec: JsonDict) -> list[str]:
    """The jobset plugin's Validate of runtime patches: validation.IsDomainPrefixedPath on each manager, no env
    for the node and initializer containers."""
    errors = []
    for i, patch in enumerate(spec.get("runtimePatches") or []):
        manager = str(patch.get("manager") or "")
        path = f"spec.runtimePatches[{i}].manager"
        host, _, rest = manager.partition("/")
        if not host or not rest:
            errors.append(f'{path}: Invalid value: "{manager}": must be a domain-prefixed path (such as '
                          '"acme.io/foo")')
        elif len(host) > 253 or not _DNS1123_SUBDOMAIN.match(host):
            errors.append(f'{path}: Invalid value: "{host}": a lowercase RFC 1123 subdomain must consist of lower '
                          "case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
                          "character")
        elif not _PATH.match(rest):
            errors.append(f'{path}: Invalid value: "{rest}": must be a valid path')
        # The plugin also checks that patched jobs and containers exist, but against the runtime with the
        # patches already merged in, where they always do; only env on the three named containers can fail.
        for rjob in ((((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {})
                     .get("replicatedJobs") or []):
            pod = ((((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {})
            if any(c.get("env") and c.get("name") in ("dataset-initializer", "model-initializer", NODE)
                   for c in pod.get("containers") or []):
                errors.append("spec.runtimePatches: Invalid value: ...: must not have envs for the "
                              "dataset-initializer, model-initializer, node containers")
    return errors


def default_runtime(runtime: JsonDict) -> None:
    """The runtime CRDs' defaults: the MPI and Flux policies' fields, coscheduling's timeout."""
    spec = runtime.get("spec") or {}
    policy = spec.get("mlPolicy") or {}
    if isinstance(policy.get("mpi"), dict):
        mpi = policy["mpi"]
        mpi.setdefault("numProcPerNode", 1)
        mpi.setdefault("mpiImplementation", "OpenMPI")
        mpi.setdefault("sshAuthMountPath", "/root/.ssh")
        mpi.setdefault("runLauncherAsNode", False)
    if isinstance(policy.get("flux"), dict):
        policy["flux"].setdefault("numProcPerNode", 1)
    coscheduling = (spec.get("podGroupPolicy") or {}).get("coscheduling")
    if isinstance(coscheduling, dict):
        coscheduling.setdefault("scheduleTimeoutSeconds", 60)


def _runtime_crd_errors(runtime: JsonDict) -> list[tuple[str, str, str]]:
    policy = (runtime.get("spec") or {}).get("mlPolicy") or {}
    errors: list[tuple[str, str, str]] = []
    if sum(1 for key in ML_POLICIES if key in policy) > 1:
        errors.append(("spec.mlPolicy", "FieldValueInvalid",
                       'Invalid value: "object": Only one of the policy can be configured'))
    implementation = (policy.get("mpi") or {}).get("mpiImplementation")
    if implementation not in (None, "OpenMPI", ""):
        errors.append(("spec.mlPolicy.mpi.mpiImplementation", "FieldValueNotSupported",
                       f'Unsupported value: "{implementation}": supported values: "OpenMPI", ""'))
    procs = (policy.get("flux") or {}).get("numProcPerNode")
    if isinstance(procs, int) and procs < 1:
        errors.append(("spec.mlPolicy.flux.numProcPerNode", "FieldValueInvalid",
                       'Invalid value: "integer": NumProcPerNode in fluxPolicy must be >= 1'))
    return errors


def _name_length_errors(runtime: JsonDict, limit: int | None) -> list[str]:
    """Trainer v2.4.0's runtime webhook rule (kubeflow/trainer#4394, as issue 38 quotes the release notes):
    a ReplicatedJob name of at most `limit` characters. The source is not stored here, so the wording is
    ours, written as the webhook's other field errors are."""
    if limit is None:
        return []
    rjobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs") or []
    return [f'spec.template.spec.replicatedJobs[{i}].name: Invalid value: "{name}": must be no more than {limit} '
            f"characters ({len(name)} given)"
            for i, name in enumerate(str(r.get("name") or "") for r in rjobs) if len(name) > limit]


def _flux_errors(spec: JsonDict, rspec: JsonDict, rjobs: list[JsonDict]) -> list[str]:
    """Flux's Validate: at least one process per node, and its installer init container is reserved."""
    flux = (rspec.get("mlPolicy") or {}).get("flux")
    if not isinstance(flux, dict):
        return []
    errors = []
    procs = (spec.get("trainer") or {}).get("numProcPerNode", flux.get("numProcPerNode"))
    if isinstance(procs, int) and procs < 1:
        errors.append(f"spec.trainer.numProcPerNode: Invalid value: {procs}: must be greater than or equal to 1 "
                      "for Flux TrainJob")
    for rjob in rjobs:
        if rjob.get("name") != NODE:
            continue
        pod = ((((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {})
        errors += [f'spec.trainer.initContainers: Invalid value: "{FLUX_INSTALLER}": InitContainer '
                   f"'{FLUX_INSTALLER}' is reserved"
                   for c in pod.get("initContainers") or [] if c.get("name") == FLUX_INSTALLER]
    return errors


def _mpi_errors(spec: JsonDict, policy: JsonDict, rjobs: list[JsonDict], prte: bool = False) -> list[str]:
    """The MPI plugin's Validate: a runLauncherAsNode runtime without both launcher and node runs one node; no
    OpenMPI env of its own (`prte`: the PRTE names are reserved too, kubeflow/trainer#4029)."""
    if not isinstance(policy.get("mpi"), dict):
        return []
    errors = []
    trainer = spec.get("trainer") or {}
    names = {r.get("name") for r in rjobs}
    nodes = trainer.get("numNodes", 1)
    if (policy["mpi"].get("runLauncherAsNode") and isinstance(nodes, int) and nodes >= 2
            and not {LAUNCHER, NODE} <= names):
        errors.append(f"spec.trainer.numNodes: Invalid value: {nodes}: must have 1 when MPI trainingRuntime with "
                      "enabled runLauncherAsNode does not have either launcher and node")
    reserved = {*MPI_RESERVED, *(PRTE_RESERVED if prte else ())}
    bad = sorted({e.get("name") for e in trainer.get("env") or []} & reserved)
    if bad:
        errors.append(f"spec.trainer.env: Invalid value: ...: must not have reserved envs, invalid envs configured: "
                      f"[{' '.join(bad)}]")
    return errors


def default_patch_times(tj: JsonDict, old: JsonDict | None) -> None:
    """The TrainJob defaulter: each runtime patch's `time`, now for a new or changed patch, kept otherwise."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    before = {p.get("manager"): p for p in ((old or {}).get("spec") or {}).get("runtimePatches") or []}
    for patch in (tj.get("spec") or {}).get("runtimePatches") or []:
        if not isinstance(patch, dict):
            continue
        previous = before.get(patch.get("manager")) if old is not None else None
        if previous is None:
            patch.setdefault("time", now)
            continue
        same = {k: v for k, v in previous.items() if k != "time"} == {k: v for k, v in patch.items() if k != "time"}
        patch["time"] = previous.get("time", now) if same else now


class TrainAdmission:
    """The admission of trainjobs, the two runtime kinds and jobsets; needs the store to find runtimes.
    `rules`: what the profile's Trainer release adds to its webhooks (v2.3.0's, nothing, by default)."""

    def __init__(self, rules: TrainerRules | None = None) -> None:
        self.store: Store | None = None
        self.rules = rules or TrainerRules()

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
        elif rtype in ("trainingruntimes", "clustertrainingruntimes"):
            default_runtime(obj)
            crd = _runtime_crd_errors(obj)
            if crd:
                raise invalid(RESOURCES[rtype], obj["metadata"].get("name", ""), crd)
            if operation != "CREATE" and rtype[0] != "c":
                return
            labels = obj["metadata"].get("labels") or {}
            if labels.get("trainer.kubeflow.org/webhook-validation") == "disabled":
                return
            singular = RESOURCES[rtype].singular
            errors = self._runtime_errors(obj) + _name_length_errors(obj, self.rules.replicated_job_name_max)
            self._deny(f"validator.{singular}.trainer.kubeflow.org", errors)
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
            default_patch_times(tj, old)
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
        errors += _flux_errors(spec, rspec, rjobs)
        errors += _mpi_errors(spec, rspec.get("mlPolicy") or {}, rjobs, self.rules.prte_env)
        errors += _patch_rule_errors(spec)
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
