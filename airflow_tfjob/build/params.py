"""The parameters a job manifest is built from, one dataclass (pure; re-exported by manifest.py).

Their friendly forms are turned into Kubernetes ones by :mod:`airflow_tfjob.build.convert` and
applied by :func:`airflow_tfjob.build.manifest.build_job`; their types are checked first by
:mod:`airflow_tfjob.build.paramtypes`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from airflow_tfjob.build.convert import EnvValue, MountSpec


@dataclass(frozen=True)
class JobParameters:
    """Every parameter :func:`~airflow_tfjob.build.manifest.build_job` understands. ``None`` (the default) means "leave as is".

    Replica layout
      replicas: ``{"worker": 3, "ps": 1}`` (keys chief, master, ps, worker, evaluator in any case).
      restart_policy: ``"OnFailure"`` for every type, or ``{"ps": "Always", "worker": "OnFailure"}``.
    Container (the kind's training container, ``tensorflow`` for a TFJob, of every replica type)
      image / images: one image, and per-type overrides ``{"ps": "img-cpu"}``.
      image_pull_policy: ``Always`` / ``IfNotPresent`` / ``Never``.
      command / args: a list, or a string split like a shell would (``shlex``). ``args`` replaces.
      hyperparameters: ``{"epochs": 10, "learning_rate": 1e-3}`` -> ``--epochs=10 --learning_rate=0.001``,
        appended to the args in insertion order, replacing any ``--epochs``/``--epochs=...`` already
        there. ``True`` -> bare flag ``--key``; ``False`` and ``None`` -> left out; lists ->
        ``--key=a,b``; dicts -> ``--key=<json>``. Keys already starting with ``-`` are used as is.
      env: ``{"NAME": "value"}`` (numbers and booleans become strings, ``true``/``false``), a value
        may also be an EnvVar-like dict (``{"valueFrom": {...}}``); or a list of EnvVar dicts.
      secret_env: ``{"API_TOKEN": "s3cr3t"}``: literal values that are hidden by :func:`redact`
        (rendered manifest, XCom, logs). They are still stored in the TFJob object in the cluster;
        prefer ``env_from_secrets`` when a Kubernetes Secret exists.
      env_from_secrets: ``{"VAR": "secret-name:key"}`` (or ``("secret-name", "key")``) -> secretKeyRef.
      env_from_config_maps: ``{"VAR": "config-map:key"}`` -> configMapKeyRef.
      env_from: ``["secret:name", "configmap:name"]`` or EnvFromSource dicts -> whole-object envFrom.
      resources: ``{"cpu": "2", "memory": "4Gi"}`` sets requests **and** limits (predictable
        placement); ``{"requests": {...}, "limits": {...}}`` sets them separately; both forms mix.
        A ``gpus`` key is allowed here too.
      gpus: ``nvidia.com/gpu`` limit on every type except PS (use ``replica_resources`` for a PS).
      replica_resources: per type, same shape as ``resources`` (``{"ps": {"cpu": "1"}, "worker": {"gpus": 2}}``),
        applied after the job-wide values.
      volume_mounts: VolumeMount dicts for the tensorflow container.
      working_dir, ports (``{"tfjob-port": 2222, "tensorboard": 6006}`` or ContainerPort dicts).
    Pod template (every replica type)
      volumes: Volume dicts.
      pvc: ``"claim:/mount/path"`` (``":ro"`` suffix for read-only), ``{"claim": "data",
        "mount_path": "/data", "read_only": False, "sub_path": None}``, or a list of those.
      secret_volumes / config_map_volumes: ``{"name": "/mount/path"}`` or a list of
        ``{"secret"|"config_map": name, "mount_path": ..., "items": [...]}``; mounted read-only.
      node_selector, tolerations, service_account, image_pull_secrets (names), pod_labels,
      pod_annotations (e.g. ``{"sidecar.istio.io/inject": "false"}``).
      replica_placement: per type, ``{"worker": {"node_selector": {...}, "tolerations": [...],
        "affinity": {...}, "priority_class": "...", "scheduler_name": "..."}}``, applied after the
        job-wide node_selector and tolerations.
    TFJob
      labels, annotations; queue: Kueue's ``kueue.x-k8s.io/queue-name`` label.
      clean_pod_policy, ttl_seconds_after_finished, active_deadline_seconds, backoff_limit, suspend,
      managed_by: ``spec.runPolicy``.
      scheduling: ``{"queue", "min_available", "priority_class", "min_resources",
        "schedule_timeout_seconds"}`` (camelCase accepted) -> ``spec.runPolicy.schedulingPolicy``.
      success_policy (``""`` or ``AllWorkers``), enable_dynamic_worker: TFJob only.
    PyTorchJob
      nproc_per_node: processes per pod, an int or ``"auto"``/``"cpu"``/``"gpu"`` (``spec.nprocPerNode``,
        a string in the CRD).
      elastic_policy: ``{"min_replicas", "max_replicas", "rdzv_backend", "rdzv_host", "rdzv_port",
        "rdzv_id", "rdzv_conf" (a dict), "standalone", "max_restarts", "metrics"}`` (camelCase
        accepted; ``n_proc_per_node`` is deprecated) -> ``spec.elasticPolicy``. PaddleJob takes
        ``min_replicas``, ``max_replicas``, ``max_restarts`` and ``metrics``.
    """

    replicas: Mapping[str, int] | None = None
    restart_policy: str | Mapping[str, str] | None = None
    image: str | None = None
    images: Mapping[str, str] | None = None
    image_pull_policy: str | None = None
    command: str | Sequence[Any] | None = None
    args: str | Sequence[Any] | None = None
    hyperparameters: Mapping[str, Any] | None = None
    env: Mapping[str, EnvValue] | Sequence[Mapping[str, Any]] | None = None
    secret_env: Mapping[str, str] | None = None
    env_from_secrets: Mapping[str, Any] | None = None
    env_from_config_maps: Mapping[str, Any] | None = None
    env_from: Sequence[str | Mapping[str, Any]] | None = None
    resources: Mapping[str, Any] | None = None
    gpus: int | None = None
    replica_resources: Mapping[str, Mapping[str, Any]] | None = None
    replica_placement: Mapping[str, Mapping[str, Any]] | None = None
    volume_mounts: Sequence[Mapping[str, Any]] | None = None
    working_dir: str | None = None
    ports: Mapping[str, int] | Sequence[Mapping[str, Any] | int] | None = None
    volumes: Sequence[Mapping[str, Any]] | None = None
    pvc: MountSpec | Sequence[MountSpec] | None = None
    secret_volumes: Mapping[str, str] | Sequence[Mapping[str, Any]] | None = None
    config_map_volumes: Mapping[str, str] | Sequence[Mapping[str, Any]] | None = None
    node_selector: Mapping[str, str] | None = None
    tolerations: Sequence[Mapping[str, Any]] | None = None
    service_account: str | None = None
    image_pull_secrets: Sequence[str] | None = None
    pod_labels: Mapping[str, str] | None = None
    pod_annotations: Mapping[str, str] | None = None
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    queue: str | None = None
    clean_pod_policy: str | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    suspend: bool | None = None
    managed_by: str | None = None
    scheduling: Mapping[str, Any] | None = None
    success_policy: str | None = None
    enable_dynamic_worker: bool | None = None
    nproc_per_node: int | str | None = None
    elastic_policy: Mapping[str, Any] | None = None


PARAMETER_NAMES: tuple[str, ...] = tuple(f.name for f in fields(JobParameters))
