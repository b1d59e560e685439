"""A TensorBoard for a training job (any kind), as ordinary Kubernetes objects: one pod and one Service.

Why a pod and not a sidecar: the job's pods come and go (restarts, cleanPodPolicy) while the board
should stay up for the whole run and optionally after it. Both objects carry an ownerReference to
the TFJob, so deleting the job removes them too; the operator also deletes them explicitly when the
job ends, unless asked to keep them.

The link comes from the Service's status (LoadBalancer ingress) or from a URL template (ClusterIP
behind an Ingress or a proxy): nothing here knows which cluster it talks to. The pod listens on its
own pod IP (downward API), the standard way to serve a Service without binding every interface.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

XCOM_KEY = "tensorboard_url"
CONTAINER = "tensorboard"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_INSTANCE = "app.kubernetes.io/instance"
COMPONENT = "tensorboard"
SERVICE_TYPES = ("LoadBalancer", "ClusterIP", "NodePort")
_MAX_NAME = 63
_SUFFIX = "-tensorboard"


class TensorBoardError(Exception):
    """The board could not be started or its address did not appear in time."""


@dataclass(frozen=True)
class TensorBoardSpec:
    """What to run and how to reach it; JSON-serialisable so a deferred task can rebuild it."""

    log_dir: str
    image: str = "tensorflow/tensorflow:2.21.0"
    service_type: str = "LoadBalancer"
    # Fields: name (job), namespace, service, port, ip, node_port. Required unless LoadBalancer.
    url_template: str | None = None
    port: int = 6006
    keep: bool = False
    ready_timeout: float = 120.0
    volumes: list[dict[str, Any]] = field(default_factory=list)
    volume_mounts: list[dict[str, Any]] = field(default_factory=list)
    resources: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not self.log_dir:
            raise ValueError("tensorboard.log_dir: required (the directory the training writes summaries to)")
        if self.service_type not in SERVICE_TYPES:
            raise ValueError(f"tensorboard.service_type: {self.service_type!r} is not one of {SERVICE_TYPES}")
        if self.service_type != "LoadBalancer" and not self.url_template:
            raise ValueError(
                f"tensorboard.url_template: required with service_type {self.service_type!r} "
                "(only a LoadBalancer publishes an address the provider can read)"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def coerce(cls, value: TensorBoardSpec | Mapping[str, Any] | str) -> TensorBoardSpec:
        """Accepts a spec, its dict form, or a bare log directory."""
        if isinstance(value, TensorBoardSpec):
            return value
        if isinstance(value, str):
            return cls(log_dir=value)
        return cls(**dict(value))


def tensorboard_name(job_name: str) -> str:
    """``<job>-tensorboard``, shortened from the job's side so it stays a DNS-1035 label."""
    base = job_name[: _MAX_NAME - len(_SUFFIX)].rstrip("-")
    return base + _SUFFIX


def build_objects(spec: TensorBoardSpec, job: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod and the Service for ``job`` (a TFJob object as created, with its uid)."""
    meta = job["metadata"]
    name = tensorboard_name(meta["name"])
    labels = {LABEL_COMPONENT: COMPONENT, LABEL_INSTANCE: name}
    # controller=False: the training-operator must not take the board for one of its replicas.
    owner = {
        "apiVersion": job.get("apiVersion", "kubeflow.org/v1"),
        "kind": job.get("kind", "TFJob"),
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": False,
        "blockOwnerDeletion": False,
    }
    common_meta = {
        "name": name,
        "namespace": meta.get("namespace"),
        "labels": labels,
        "ownerReferences": [owner],
    }
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": spec.image,
        "command": ["tensorboard"],
        "args": [f"--logdir={spec.log_dir}", "--host=$(POD_IP)", f"--port={spec.port}"],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "http", "containerPort": spec.port, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/", "port": spec.port}, "periodSeconds": 5},
    }
    if spec.volume_mounts:
        container["volumeMounts"] = list(spec.volume_mounts)
    if spec.resources:
        container["resources"] = dict(spec.resources)
    pod_spec: dict[str, Any] = {"containers": [container], "restartPolicy": "Always"}
    if spec.volumes:
        pod_spec["volumes"] = list(spec.volumes)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": common_meta, "spec": pod_spec}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {**common_meta, "labels": dict(labels)},
        "spec": {
            "type": spec.service_type,
            "selector": dict(labels),
            "ports": [{"name": "http", "port": spec.port, "targetPort": spec.port, "protocol": "TCP"}],
        },
    }
    return pod, service


def url_from_service(spec: TensorBoardSpec, job_name: str, service: Mapping[str, Any]) -> str | None:
    """The board's URL once the Service has what it needs, else None (keep waiting).

    ``service`` is a Service as a camelCase dict (the API's JSON).
    """
    meta = service.get("metadata", {})
    ports = service.get("spec", {}).get("ports") or [{}]
    ingress = (service.get("status", {}).get("loadBalancer") or {}).get("ingress") or []
    address = ""
    if ingress:
        address = ingress[0].get("ip") or ingress[0].get("hostname") or ""
    fields = {
        "name": job_name,
        "namespace": meta.get("namespace", ""),
        "service": meta.get("name", ""),
        "port": ports[0].get("port", spec.port),
        "node_port": ports[0].get("nodePort", ""),
        "ip": address,
    }
    if spec.url_template:
        return spec.url_template.format(**fields)
    if not address:
        return None
    host = f"[{address}]" if ":" in address else address
    return f"http://{host}:{fields['port']}/"


class TensorBoard:
    """Start, locate and stop the board of one job through the hook (so under its retry policy)."""

    def __init__(self, hook: BoardAPI, spec: TensorBoardSpec, job: Mapping[str, Any]) -> None:
        self._hook = hook
        self.spec = spec
        self.job_name: str = job["metadata"]["name"]
        self.namespace: str = job["metadata"].get("namespace") or "default"
        self.name = tensorboard_name(self.job_name)
        self._pod, self._service = build_objects(spec, job)

    def start(self) -> None:
        """Create both objects; existing ones (a retried try of the same job) are reused."""
        for body in (self._pod, self._service):
            try:
                self._hook.create_core_object(body, self.namespace)
            except Exception as exc:
                if getattr(exc, "status", None) != 409:
                    raise TensorBoardError(f"cannot create {body['kind']} {self.name}: {exc}") from exc

    def wait_url(self, timeout: float | None = None, poll: float = 0.5) -> str:
        """Polls the Service until it publishes an address; raises TensorBoardError after ``timeout``."""
        limit = time.monotonic() + (self.spec.ready_timeout if timeout is None else timeout)
        while True:
            try:
                service = self._hook.get_service(self.name, self.namespace)
            except Exception as exc:
                raise TensorBoardError(f"cannot read Service {self.name}: {exc}") from exc
            url = url_from_service(self.spec, self.job_name, service) if service is not None else None
            if url:
                return url
            if time.monotonic() >= limit:
                raise TensorBoardError(
                    f"Service {self.namespace}/{self.name} has no load-balancer address after "
                    f"{self.spec.ready_timeout:.0f} s (does the cluster provide LoadBalancer Services? "
                    "use service_type='ClusterIP' with url_template otherwise)"
                )
            time.sleep(poll)

    def stop(self, force: bool = False) -> bool:
        """Deletes both objects unless the spec says keep; True if it deleted them. 404s are fine."""
        if self.spec.keep and not force:
            return False
        try:
            self._hook.delete_service(self.name, self.namespace)
            self._hook.delete_pod(self.name, self.namespace)
        except Exception as exc:
            raise TensorBoardError(f"cannot delete {self.name}: {exc}") from exc
        return True


class BoardAPI(Protocol):
    """The part of KubeflowJobHook a board needs."""

    def create_core_object(self, body: dict, namespace: str | None = None) -> dict: ...

    def get_service(self, name: str, namespace: str | None = None) -> dict | None: ...

    def delete_pod(
        self, name: str, namespace: str | None = None, grace_period_seconds: int | None = None
    ) -> None: ...

    def delete_service(self, name: str, namespace: str | None = None) -> None: ...


# ---------------------------------------------------------------- the task's lifecycle of its board


def start_for_job(
    hook: BoardAPI,
    spec: TensorBoardSpec | None,
    job: Mapping[str, Any],
    push_url: Callable[[str], None],
    log: Any,
) -> None:
    """Start the job's board (a retried try reuses it) and publish its URL for the UI's link.

    A board that does not come up is reported loudly but does not stop the training it watches.
    """
    if spec is None:
        return
    board = TensorBoard(hook, spec, job)
    try:
        board.start()
        url = board.wait_url()
    except TensorBoardError as error:
        log.error("TensorBoard for TFJob %s/%s is not available: %s", board.namespace, board.job_name, error)
        return
    push_url(url)
    log.info("TensorBoard for TFJob %s/%s: %s", board.namespace, board.job_name, url)


def stop_for_job(
    hook: BoardAPI, spec: TensorBoardSpec | None, name: str, namespace: str, log: Any, *, force: bool = False
) -> bool:
    """Remove the board after the job ended, unless the spec keeps it (force: the job is gone too).

    True when the board was removed: its link then points nowhere, and the operator clears it.
    """
    if spec is None:
        return False
    # Only the names matter to stop(); the uid is for the owner reference of new objects.
    board = TensorBoard(hook, spec, {"metadata": {"name": name, "namespace": namespace, "uid": ""}})
    try:
        if board.stop(force=force):
            log.info(
                "TensorBoard %s/%s removed (the task's TensorBoard link is cleared)", namespace, board.name
            )
            return True
        log.info("TensorBoard %s/%s kept (tensorboard_keep=True)", namespace, board.name)
    except TensorBoardError as error:
        log.warning("Could not remove TensorBoard %s/%s: %s", namespace, board.name, error)
    return False
