"""The defaults Kueue v0.19.2's v1beta2 CRDs write on every create and update
(config/components/crd/bases/kueue.x-k8s.io_{clusterqueues,localqueues,workloads,multikueueclusters}.yaml)."""

from __future__ import annotations

from airflow_tfjob.local.model.resources import JsonDict


def _spec(obj: JsonDict) -> JsonDict | None:
    spec = obj.get("spec")
    if spec is None:
        spec = obj["spec"] = {}
    return spec if isinstance(spec, dict) else None


def apply_kueue_defaults(rtype: str, obj: JsonDict) -> None:
    if rtype == "clusterqueues":
        spec = _spec(obj)
        if spec is None:
            return
        spec.setdefault("queueingStrategy", "BestEffortFIFO")
        spec.setdefault("stopPolicy", "None")
        fungibility = spec.setdefault("flavorFungibility", {})
        if isinstance(fungibility, dict):
            fungibility.setdefault("whenCanBorrow", "MayStopSearch")
            fungibility.setdefault("whenCanPreempt", "TryNextFlavor")
        preemption = spec.setdefault("preemption", {})
        if isinstance(preemption, dict):
            preemption.setdefault("withinClusterQueue", "Never")
            preemption.setdefault("reclaimWithinCohort", "Never")
            borrow = preemption.setdefault("borrowWithinCohort", {})
            if isinstance(borrow, dict):
                borrow.setdefault("policy", "Never")
    elif rtype == "localqueues":
        spec = _spec(obj)
        if spec is not None:
            spec.setdefault("stopPolicy", "None")
    elif rtype == "multikueueclusters":
        source = _spec(obj)
        source = source.get("clusterSource") if source is not None else None
        kubeconfig = source.get("kubeConfig") if isinstance(source, dict) else None
        if isinstance(kubeconfig, dict):
            kubeconfig.setdefault("locationType", "Secret")
    elif rtype == "workloads":
        spec = _spec(obj)
        if spec is None:
            return
        spec.setdefault("active", True)
        for podset in spec.get("podSets") or []:
            if isinstance(podset, dict):
                podset.setdefault("name", "main")
                podset.setdefault("count", 1)
