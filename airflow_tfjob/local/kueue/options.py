"""The Kueue emulation's options: which integrations are on (Kueue's framework names), which Kueue
objects to create at start, the WaitForPodsReady timeout. Checked before anything starts, with an
error naming the option and the fix.

Defaults are those of a v0.19.2 install from the release manifests (docs/reference/kueue-behaviour.md
§9.2): the kubeflow.org v1 kinds are **off**, so a queue label on a TFJob is ignored until the
integration is named, e.g. ``LocalCluster(kueue={"integrations": ["kubeflow.org/tfjob"]})`` or
``tfjob-local serve --kueue --kueue-integrations kubeflow.org/tfjob``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from airflow_tfjob.kinds import KINDS, JobKind

# Every integration name Kueue v0.19.2 accepts (pkg/config/validation.go validateIntegrations).
FRAMEWORKS = (
    "batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice",
    "jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper", "trainer.kubeflow.org/trainjob", "pod",
    "deployment", "statefulset", "leaderworkerset.x-k8s.io/leaderworkerset", "kubeflow.org/paddlejob",
    "kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "kubeflow.org/xgboostjob", "kubeflow.org/jaxjob",
    "sparkoperator.k8s.io/sparkapplication",
)
# config/components/manager/controller_manager_config.yaml at v0.19.2: the v1 Kubeflow kinds commented out.
DEFAULT_INTEGRATIONS = FRAMEWORKS[:12]
# What v0.18.x ships: every kind of the local cluster managed.
KUBEFLOW_V1 = tuple(f"kubeflow.org/{k.singular}" for k in KINDS)


@dataclass(frozen=True)
class KueueOptions:
    """`integrations`: Kueue framework names that are on (default: v0.19.2's shipped set, TFJob & co off);
    `objects`: Kueue objects (ResourceFlavor, ClusterQueue, LocalQueue, WorkloadPriorityClass, as dicts in
    v1beta2 form) created when the cluster starts, e.g. from `queue_objects(...)`;
    `pods_ready_timeout`: WaitForPodsReady's timeout in seconds (None: PodsReady conditions only, no
    eviction; a v0.19 install evicts after 1800), and `backoff_base_seconds` its requeue backoff (60)."""

    integrations: tuple[str, ...] = DEFAULT_INTEGRATIONS
    objects: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    pods_ready_timeout: float | None = None
    backoff_base_seconds: float = 60.0

    def __post_init__(self) -> None:
        if isinstance(self.integrations, str) or not all(isinstance(i, str) for i in self.integrations):
            raise ValueError(f"kueue integrations must be a list of names, e.g. ['kubeflow.org/tfjob'], "
                             f"got {self.integrations!r}")
        unknown = [i for i in self.integrations if i not in FRAMEWORKS]
        if unknown:
            raise ValueError(f"kueue integrations: unsupported value {unknown[0]!r}: supported values: "
                             + ", ".join(f'"{f}"' for f in FRAMEWORKS))
        object.__setattr__(self, "integrations", tuple(self.integrations))
        for i, obj in enumerate(self.objects):
            if not isinstance(obj, Mapping) or not isinstance(obj.get("kind"), str):
                raise ValueError(f"kueue objects[{i}]: expected a Kueue object with a kind "
                                 f"(e.g. ClusterQueue), got {obj!r}")
        object.__setattr__(self, "objects", tuple(self.objects))
        for name in ("pods_ready_timeout", "backoff_base_seconds"):
            value = getattr(self, name)
            if (value is not None or name == "backoff_base_seconds") and (
                    isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"kueue {name} must be a positive number of seconds, got {value!r}")

    def manages(self, kind: JobKind) -> bool:
        return kind.kueue_framework in self.integrations

    @classmethod
    def of(cls, value: bool | Mapping[str, Any] | KueueOptions | None) -> KueueOptions | None:
        """LocalCluster's `kueue=` argument: None/False (off), True (defaults), a mapping of the fields
        above, or KueueOptions."""
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, KueueOptions):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"kueue must be True, a mapping such as {{'integrations': "
                             f"['kubeflow.org/tfjob']}} or KueueOptions, got {value!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"kueue: unknown option {unknown[0]!r}; known: {', '.join(sorted(known))}")
        return cls(**value)


def parse_integrations(value: str) -> tuple[str, ...]:
    """`--kueue-integrations kubeflow.org/tfjob,kubeflow.org/pytorchjob` (Kueue's names, comma-separated)."""
    return tuple(v.strip() for v in value.split(",") if v.strip())


def load_objects(paths: Iterable[Path]) -> tuple[dict[str, Any], ...]:
    """Kueue objects from YAML files (several documents each), for `--kueue-objects`."""
    found: list[dict[str, Any]] = []
    for path in paths:
        try:
            found += [d for d in yaml.safe_load_all(Path(path).read_text()) if isinstance(d, dict)]
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError(f"--kueue-objects: cannot read {path}: {exc}") from None
    return tuple(found)


def queue_objects(
    *,
    cluster_queue: str = "cluster-queue",
    local_queue: str = "user-queue",
    namespace: str = "default",
    quota: Mapping[str, str | int] | None = None,
    flavor: str = "default-flavor",
    strategy: str = "BestEffortFIFO",
    preemption: str = "Never",
    priorities: Mapping[str, int] | None = None,
    node_labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The usual single-queue setup: one ResourceFlavor, one ClusterQueue open to every namespace with
    `quota` (e.g. {"cpu": 2, "memory": "4Gi", "nvidia.com/gpu": 1}) on that flavor, one LocalQueue, and a
    WorkloadPriorityClass per `priorities` entry (name -> value); `preemption` is withinClusterQueue."""
    quota = dict(quota or {"cpu": 4, "memory": "8Gi"})
    group = "kueue.x-k8s.io/v1beta2"
    objects: list[dict[str, Any]] = [
        {"apiVersion": group, "kind": "ResourceFlavor", "metadata": {"name": flavor},
         "spec": {"nodeLabels": dict(node_labels)} if node_labels else {}},
        {"apiVersion": group, "kind": "ClusterQueue", "metadata": {"name": cluster_queue}, "spec": {
            "namespaceSelector": {}, "queueingStrategy": strategy,
            "preemption": {"withinClusterQueue": preemption},
            "resourceGroups": [{"coveredResources": list(quota), "flavors": [{"name": flavor, "resources": [
                {"name": name, "nominalQuota": str(value)} for name, value in quota.items()]}]}]}},
        {"apiVersion": group, "kind": "LocalQueue", "metadata": {"name": local_queue, "namespace": namespace},
         "spec": {"clusterQueue": cluster_queue}},
    ]
    objects += [{"apiVersion": group, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}
                for name, value in (priorities or {}).items()]
    return objects


def kinds_managed(options: KueueOptions) -> Sequence[JobKind]:
    return [k for k in KINDS if options.manages(k)]
