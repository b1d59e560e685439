"""A TFJob manifest -> the TrainJob that runs the same training on Trainer v2 (pure): the bridge.

The bridge's one user is the API choice (operators/api_choice.py): neither adapter knows that a TFJob
can run as a TrainJob, so each answers for its own kind's manifests only; the choice asks this module
for the name limit of a TFJob that will run as a TrainJob (:func:`name_limit`) and for the TrainJob
itself (:func:`as_trainjob`). Reading such a job back is the TrainJob adapter's, through the
annotations the mapping leaves (pods.ANNOTATION_TF_REPLICAS, ANNOTATION_RANK0).

TFJobOperator(api="trainjob") builds and validates its TFJob exactly as for the TFJob API, then this
module maps it onto a TrainJob on one of the TensorFlow ClusterTrainingRuntimes the package ships
(:mod:`airflow_tfjob.jobs.trainjob.runtimes`), so a DAG keeps its parameters, its template, its task log
and its XCom whichever API the cluster serves:

- Worker only (MultiWorkerMirroredStrategy): runtime ``tensorflow-distributed``, the workers are the
  trainer's nodes (``numNodes``); Chief + Worker: ``tensorflow-chief``; Chief + PS + Worker:
  ``tensorflow-ps`` (one chief and one PS: a runtime's other replicated jobs have a fixed size).
- The Worker's container becomes the trainer (image, command, args, env, resources); the provider's
  launcher (:mod:`~airflow_tfjob.jobs.trainjob.tfconfig`) goes in front of the command and computes each
  node's TF_CONFIG. Chief and PS run the runtime's image with the same command and env, passed by a
  runtime patch (the only way a TrainJob reaches a replicated job other than the trainer's).
- Pod-level settings (volumes, mounts, node selector, tolerations, service account, pull secrets,
  security context, pod labels and annotations) become a runtime patch of every replicated job.
- runPolicy: activeDeadlineSeconds, suspend, managedBy (the values Trainer accepts) and the Kueue queue
  carry over; the cleanup intent (cleanPodPolicy) stays the provider's annotation.

What has no equivalent is refused with the replica types or field and the fix, before anything is
created: Evaluator and Master, PS without a Chief, more than one Chief or PS, per-type images,
commands or env, a sidecar, envFrom, a backoffLimit, a TTL, enableDynamicWorker. (successPolicy needs
no mapping: the runtimes succeed when the chief's, else every worker's Job completes.)
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from airflow_tfjob.build.checker import JobValidationError, Problem
from airflow_tfjob.constants import ANNOTATION_INTENDED_CLEAN_POD_POLICY
from airflow_tfjob.jobs.kinds import TFJOB, TRAINJOB
from airflow_tfjob.jobs.trainjob import tfconfig
from airflow_tfjob.jobs.trainjob.manifest import PATCH_MANAGER, build_trainjob
from airflow_tfjob.jobs.trainjob.pods import ANNOTATION_RANK0, ANNOTATION_TF_REPLICAS, TRAINER_RJOB
from airflow_tfjob.jobs.trainjob.validation import max_name_length, validate_trainjob

#: The shipped TensorFlow runtimes by the TFJob replica types they run.
RUNTIME_OF_TYPES = {
    frozenset({"Worker"}): "tensorflow-distributed",
    frozenset({"Chief", "Worker"}): "tensorflow-chief",
    frozenset({"Chief", "PS", "Worker"}): "tensorflow-ps",
}
#: The container the TensorFlow runtimes run chief and PS in (a patch may set its env, not node's).
SIDE_CONTAINER = "tensorflow"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_POD_PATCH_KEYS = (
    "volumes", "nodeSelector", "tolerations", "affinity", "serviceAccountName", "imagePullSecrets",
    "securityContext", "schedulingGates", "terminationGracePeriodSeconds",
)  # fmt: skip
# Pod fields that change nothing a TrainJob node could differ in (the runtime sets restartPolicy).
_POD_IGNORED = ("containers", "restartPolicy")
_CONTAINER_MAPPED = ("name", "image", "command", "args", "env", "resources", "volumeMounts", "workingDir")
_CONTAINER_IGNORED = ("ports", "imagePullPolicy", "securityContext")


class _Refusals:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, field: str, problem: str, fix: str) -> None:
        self.problems.append(Problem(field, problem, fix))


def runtime_for(types: frozenset[str]) -> str | None:
    return RUNTIME_OF_TYPES.get(types)


def name_limit(tfjob: Mapping[str, Any]) -> int:
    """The longest name the TFJob may get so that every pod name JobSet derives for the TrainJob that
    runs it fits: each replica type's pods are named by the replicated job it runs in (a chief's
    ``-chief-0-0`` is one character longer than a worker's ``-node-0-0``), its count by its replicas
    (an unreadable count as if 100: two digits of index)."""
    specs = (tfjob.get("spec") or {}).get(TFJOB.spec_key) or {}
    limits = [
        max_name_length(
            spec.get("replicas", 1) if isinstance(spec.get("replicas", 1), int) else 100,
            tfconfig.RJOB_OF_TYPE.get(str(rtype).lower(), TRAINER_RJOB),
        )
        for rtype, spec in (specs.items() if isinstance(specs, Mapping) else ())
        if isinstance(spec, Mapping)
    ]
    return min(limits, default=max_name_length(1))


def as_trainjob(tfjob: Mapping[str, Any]) -> dict[str, Any]:
    """The TrainJob that runs a validated, named TFJob, validated as any TrainJob is (refusals name the
    replica types or field and the fix)."""
    trainjob = to_trainjob(tfjob)
    validate_trainjob(trainjob)
    return trainjob


def _counts(specs: Mapping[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, spec in specs.items():
        rtype = TFJOB.canonical_type(str(key)) or str(key)
        replicas = spec.get("replicas", 1) if isinstance(spec, Mapping) else 1
        out[rtype] = replicas if isinstance(replicas, int) else 1
    return out


def _check_types(counts: Mapping[str, int], refuse: _Refusals) -> None:
    layout = ", ".join(f"{t}={n}" for t, n in counts.items())
    for rtype, fix in (
        (
            "Evaluator",
            "evaluate in the chief or in a task after the training (Trainer v2 has no side-car evaluator)",
        ),
        ("Master", "use chief=1 instead of master (the same role in TF_CONFIG)"),
    ):
        if counts.get(rtype):
            refuse.add(
                rtype.lower(),
                f"{rtype} replicas ({layout}) cannot run on a TrainJob",
                fix + ", or run it with api='tfjob'",
            )
    if not counts.get("Worker"):
        refuse.add(
            "worker",
            f"the job has no Worker ({layout}): the TrainJob's nodes are its workers",
            "give worker=1 or more",
        )
    if counts.get("PS") and not counts.get("Chief"):
        refuse.add(
            "ps",
            f"PS without a Chief ({layout}) has no TensorFlow runtime",
            "add chief=1 (ParameterServerStrategy's coordinator)",
        )
    for rtype in ("Chief", "PS"):
        if counts.get(rtype, 0) > 1:
            refuse.add(
                rtype.lower(),
                f"{counts[rtype]} {rtype} replicas: the runtime's {rtype.lower()} replicated job has one pod",
                f"use {rtype.lower()}=1, or run it with api='tfjob'",
            )


def _container(template: Mapping[str, Any]) -> dict[str, Any]:
    containers = (
        ((template.get("spec") or {}).get("containers") or [{}]) if isinstance(template, Mapping) else [{}]
    )
    named = [c for c in containers if isinstance(c, Mapping) and c.get("name") == TFJOB.container]
    return dict(named[0] if named else containers[0])


def _check_same(specs: Mapping[str, Any], worker_key: str, refuse: _Refusals) -> None:
    """Chief and PS must run what the workers run: a runtime patch cannot give them their own."""
    base = _container(specs[worker_key].get("template") or {})
    for key, spec in specs.items():
        if key == worker_key:
            continue
        other = _container(spec.get("template") or {})
        for field in ("image", "command", "args", "env", "workingDir"):
            if other.get(field) != base.get(field):
                param = "images" if field == "image" else field
                refuse.add(
                    f"{param} ({key})",
                    f"the {key} replicas' {field} differs from the workers': a TrainJob gives every node one {field}",
                    f"give one {field} for every replica type, or run it with api='tfjob'",
                )


def _check_pod(spec: Mapping[str, Any], key: str, refuse: _Refusals) -> None:
    pod = (spec.get("template") or {}).get("spec") or {}
    for field in pod:
        if field not in (*_POD_PATCH_KEYS, *_POD_IGNORED):
            refuse.add(
                f"{key} pod {field}",
                "has no TrainJob equivalent",
                "remove it, or run the job with api='tfjob'",
            )
    containers = pod.get("containers") or []
    if len(containers) > 1:
        refuse.add(
            f"{key} containers",
            "a TrainJob node runs one container",
            "remove the sidecars, or run the job with api='tfjob'",
        )
    if pod.get("initContainers"):
        refuse.add(
            f"{key} initContainers",
            "a TrainJob cannot add init containers",
            "use dataset/model initializers (TrainJobOperator), or api='tfjob'",
        )
    container = _container(spec.get("template") or {})
    for field in container:
        if field == "envFrom":
            refuse.add(
                "env_from",
                "a TrainJob's trainer takes env, not envFrom",
                "use env_from_secrets / env_from_config_maps (single keys)",
            )
        elif field not in (*_CONTAINER_MAPPED, *_CONTAINER_IGNORED):
            refuse.add(
                f"{key} container {field}",
                "has no TrainJob equivalent",
                "remove it, or run the job with api='tfjob'",
            )
    if not container.get("command"):
        refuse.add(
            "command",
            "is missing: the provider puts its TF_CONFIG launcher in front of the command, so it must know it",
            "give the command the image would run, e.g. command=['python', 'train.py']",
        )


def _run_policy(spec: Mapping[str, Any], refuse: _Refusals) -> dict[str, Any]:
    policy = spec.get("runPolicy") or {}
    out: dict[str, Any] = {}
    for key in ("activeDeadlineSeconds", "suspend", "managedBy"):
        if policy.get(key) is not None:
            out[key] = policy[key]
    if policy.get("backoffLimit") is not None:
        refuse.add(
            "backoff_limit",
            "a TrainJob's restarts are its runtime's (a failing node fails the job)",
            "remove backoff_limit",
        )
    if policy.get("ttlSecondsAfterFinished") not in (None, 0):
        refuse.add(
            "ttl_seconds_after_finished",
            "a TrainJob has no TTL",
            "remove it; on_finish_action='delete' deletes the job after its logs are read",
        )
    scheduling = dict(policy.get("schedulingPolicy") or {})
    queue = scheduling.pop("queue", None)
    if queue:
        out["queue"] = queue
    if scheduling:
        refuse.add(
            "scheduling",
            f"{sorted(scheduling)} have no TrainJob equivalent",
            "remove them (a runtime's podGroupPolicy schedules gangs)",
        )
    if spec.get("enableDynamicWorker"):
        refuse.add("enable_dynamic_worker", "a TrainJob's TF_CONFIG is static", "remove it")
    return out


def _pod_patch(spec: Mapping[str, Any], container: Mapping[str, Any]) -> dict[str, Any]:
    template = spec.get("template") or {}
    pod = template.get("spec") or {}
    patch_spec = {k: copy.deepcopy(pod[k]) for k in _POD_PATCH_KEYS if pod.get(k) is not None}
    patch: dict[str, Any] = {}
    metadata = {
        k: dict(v)
        for k, v in (template.get("metadata") or {}).items()
        if k in ("labels", "annotations") and v
    }
    if metadata:
        patch["metadata"] = metadata
    if patch_spec:
        patch["spec"] = patch_spec
    return patch


def _rjob_patch(
    rjob: str, pod_patch: Mapping[str, Any], container: Mapping[str, Any] | None
) -> dict[str, Any]:
    pod = copy.deepcopy(dict(pod_patch))
    if container:
        pod.setdefault("spec", {})["containers"] = [container]
    return {"name": rjob, "template": {"spec": {"template": pod}}}


def to_trainjob(tfjob: Mapping[str, Any]) -> dict[str, Any]:
    """The TrainJob for a validated, named TFJob manifest; JobValidationError for what cannot map."""
    refuse = _Refusals()
    metadata = copy.deepcopy(dict(tfjob.get("metadata") or {}))
    spec = tfjob.get("spec") or {}
    specs = spec.get(TFJOB.spec_key) or {}
    counts = _counts(specs)
    _check_types(counts, refuse)
    worker_key = next((k for k in specs if TFJOB.canonical_type(str(k)) == "Worker"), None)
    if worker_key is not None:
        _check_same(specs, worker_key, refuse)
        for key, rspec in specs.items():
            _check_pod(rspec, key, refuse)
    policy = _run_policy(spec, refuse)
    runtime = runtime_for(frozenset(counts))
    if refuse.problems or worker_key is None or runtime is None:
        raise JobValidationError(
            refuse.problems or [Problem("replicas", "cannot map", "use api='tfjob'")],
            kind="TFJob on TrainJob",
        )
    name = str(metadata["name"])
    container = _container(specs[worker_key]["template"])
    # Replicas by TensorFlow task type (TFJob's types lower-cased: TFJOB.canonical_type spells them).
    tasks = {ttype: counts.get(TFJOB.canonical_type(ttype) or ttype, 0) for ttype in tfconfig.TASK_TYPES}
    cluster = tfconfig.cluster_env(name, tasks)
    user_command = [*container.get("command", []), *container.get("args", [])]
    env = list(container.get("env") or [])
    launcher_env = [{"name": tfconfig.ENV_CLUSTER, "value": cluster}]
    if container.get("workingDir"):
        launcher_env.append({"name": tfconfig.ENV_WORKING_DIR, "value": container["workingDir"]})
    pod_patch = _pod_patch(specs[worker_key], container)
    mounts = container.get("volumeMounts")
    rjob_patches = []
    if mounts or pod_patch:
        node = {"name": TRAINER_RJOB, "volumeMounts": copy.deepcopy(mounts)} if mounts else None
        rjob_patches.append(_rjob_patch(TRAINER_RJOB, pod_patch, node))
    for ttype in tfconfig.TASK_TYPES:
        if tasks[ttype] and tfconfig.RJOB_OF_TYPE[ttype] != TRAINER_RJOB:
            side = {
                "name": SIDE_CONTAINER,
                "env": [
                    *env,
                    *launcher_env,
                    {"name": tfconfig.ENV_TASK_TYPE, "value": ttype},
                    {"name": tfconfig.ENV_COMMAND, "value": json.dumps(user_command)},
                    {"name": tfconfig.ENV_LAUNCHER, "value": tfconfig.LAUNCHER},
                ],
                **({"volumeMounts": copy.deepcopy(mounts)} if mounts else {}),
            }
            rjob_patches.append(_rjob_patch(tfconfig.RJOB_OF_TYPE[ttype], pod_patch, side))
    patches = None
    if rjob_patches:
        patches = [
            {
                "manager": PATCH_MANAGER,
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": rjob_patches}}},
            }
        ]
    labels = dict(metadata.get("labels") or {})
    if policy.get("queue"):
        labels[QUEUE_LABEL] = policy["queue"]
    annotations = dict(metadata.get("annotations") or {})
    # Rank 0 is the chief where there is one, else the trainer's node 0 (its first worker).
    annotations[ANNOTATION_RANK0] = f"{tfconfig.RJOB_OF_TYPE['chief' if tasks['chief'] else 'worker']}-0-0"
    annotations[ANNOTATION_TF_REPLICAS] = json.dumps(
        {
            TFJOB.canonical_type(ttype): [tfconfig.RJOB_OF_TYPE[ttype], tasks[ttype]]
            for ttype in tfconfig.TASK_TYPES
            if tasks[ttype]
        }
    )
    annotations.setdefault(
        ANNOTATION_INTENDED_CLEAN_POD_POLICY, (spec.get("runPolicy") or {}).get("cleanPodPolicy") or "None"
    )
    base = {
        "apiVersion": TRAINJOB.api_version,
        "kind": TRAINJOB.kind,
        "metadata": {**metadata, "labels": labels, "annotations": annotations},
        "spec": {},
    }
    return build_trainjob(
        base,
        runtime=runtime,
        image=container.get("image"),
        command=[*tfconfig.LAUNCHER_COMMAND, *container.get("command", [])],
        args=list(container.get("args") or []),
        env=[*env, *launcher_env, {"name": tfconfig.ENV_TASK_TYPE, "value": "worker"}],
        num_nodes=tasks["worker"],
        resources_per_node=container.get("resources") or None,
        runtime_patches=patches,
        suspend=policy.get("suspend"),
        active_deadline_seconds=policy.get("activeDeadlineSeconds"),
        managed_by=policy.get("managedBy"),
    )
