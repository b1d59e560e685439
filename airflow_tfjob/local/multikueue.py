"""MultiKueue's shape in one local cluster (`LocalCluster(multikueue_workers=2)`, `tfjob-local serve
--multikueue-workers 2`): the worker clusters' names and options, and the objects the manager holds for
them, as a MultiKueue setup (Kueue's site, "Setup a MultiKueue environment") installs them.

Why a module of its own: the manager and its workers are each a whole ClusterRuntime (own API server,
store, controllers and runner); cluster.py starts them, and what ties them together is only data: for each
worker a kubeconfig Secret in `kueue-system` and a MultiKueueCluster naming it, one MultiKueueConfig
listing the workers, one AdmissionCheck whose controller is MultiKueue and whose parameters name that
config. A ClusterQueue of the manager dispatches through MultiKueue when its admissionChecksStrategy names
the check (`queue_objects(..., admission_checks=[CHECK_NAME])`); each worker gets the manager's Kueue
objects without that check, so that the same queue names admit the remote copies there. Pure: it builds
dicts and checks options, and creates nothing.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from airflow_tfjob.local.kueue.options import (
    MANAGER_NAMESPACE,
    MULTIKUEUE_CONTROLLER,
    MULTIKUEUE_SECRET_KEY,
    KueueOptions,
)
from airflow_tfjob.local.model.resources import KUEUE_GROUP, JsonDict, clone

#: Kueue's MultiKueue controller name (kueue.x-k8s.io/multikueue), which an AdmissionCheck names.
CONTROLLER_NAME = MULTIKUEUE_CONTROLLER
#: The AdmissionCheck and the MultiKueueConfig the manager gets (one of each, for all its workers).
CHECK_NAME = "multikueue"
CONFIG_NAME = "multikueue"
#: The Secret key Kueue reads a worker's kubeconfig from (multikueuecluster.go: "kubeconfig").
SECRET_KEY = MULTIKUEUE_SECRET_KEY
#: More workers than a 2-core machine runs usefully; MultiKueueConfig takes at most 20 clusters.
MAX_WORKERS = 8
_V1BETA2 = f"{KUEUE_GROUP}/v1beta2"


def worker_names(count: int) -> tuple[str, ...]:
    """`worker1` ... `workerN`, the names Kueue's own MultiKueue tests give their worker clusters."""
    return tuple(f"worker{i}" for i in range(1, count + 1))


def secret_name(worker: str) -> str:
    return f"{worker}-kubeconfig"


def check_workers(count: Any, kueue: KueueOptions | None) -> KueueOptions | None:
    """`multikueue_workers` checked against the rest of the start options: a whole number from 0 to
    MAX_WORKERS, and Kueue on when it is not 0. Returns the manager's Kueue options (with the MultiKueue
    kinds served when there are workers)."""
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_WORKERS:
        raise ValueError(f"multikueue_workers must be a whole number from 0 to {MAX_WORKERS}, got {count!r}")
    if count == 0:
        return kueue
    if kueue is None:
        raise ValueError("multikueue_workers needs Kueue on the manager: pass kueue=True (or a mapping of its "
                         "options; --kueue on the command line)")
    return replace(kueue, multikueue=True)


def worker_options(manager: KueueOptions) -> KueueOptions:
    """A worker's Kueue: the manager's integrations and settings, its objects without the MultiKueue
    admission check (the worker admits the remote copy on quota alone), and no MultiKueue kinds."""
    return replace(manager, multikueue=False, objects=tuple(_without_check(o) for o in manager.objects))


def _without_check(obj: Mapping[str, Any]) -> JsonDict:
    copy = clone(dict(obj))
    spec = copy.get("spec")
    if copy.get("kind") == "ClusterQueue" and isinstance(spec, dict):
        strategy = spec.get("admissionChecksStrategy")
        if isinstance(strategy, dict):
            kept = [c for c in strategy.get("admissionChecks") or [] if not
                    (isinstance(c, dict) and c.get("name") == CHECK_NAME)]
            if kept:
                strategy["admissionChecks"] = kept
            else:
                spec.pop("admissionChecksStrategy")
    return copy


def manager_objects(kubeconfigs: Mapping[str, str]) -> list[tuple[str, JsonDict]]:
    """(plural, object) to create on the manager for workers {name: kubeconfig text}, in order: each
    worker's Secret and MultiKueueCluster, then the MultiKueueConfig and the AdmissionCheck."""
    objects: list[tuple[str, JsonDict]] = []
    for worker, text in kubeconfigs.items():
        objects.append(("secrets", {
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": secret_name(worker), "namespace": MANAGER_NAMESPACE},
            "data": {SECRET_KEY: base64.b64encode(text.encode()).decode()},
        }))
        objects.append(("multikueueclusters", {
            "apiVersion": _V1BETA2, "kind": "MultiKueueCluster", "metadata": {"name": worker},
            "spec": {"clusterSource": {"kubeConfig": {"location": secret_name(worker), "locationType": "Secret"}}},
        }))
    objects.append(("multikueueconfigs", {
        "apiVersion": _V1BETA2, "kind": "MultiKueueConfig", "metadata": {"name": CONFIG_NAME},
        "spec": {"clusters": list(kubeconfigs)},
    }))
    objects.append(("admissionchecks", {
        "apiVersion": _V1BETA2, "kind": "AdmissionCheck", "metadata": {"name": CHECK_NAME},
        "spec": {"controllerName": CONTROLLER_NAME,
                 "parameters": {"apiGroup": KUEUE_GROUP, "kind": "MultiKueueConfig", "name": CONFIG_NAME}},
    }))
    return objects
