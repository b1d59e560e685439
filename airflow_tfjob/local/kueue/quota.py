"""Quota arithmetic of a standalone ClusterQueue (pkg/scheduler/flavorassigner/flavorassigner.go,
docs/reference/kueue-behaviour.md §5.3): what a Workload's pod sets request, the flavor each gets, and
Kueue's messages when they do not fit. Pure: usage is passed in."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from airflow_tfjob.local.kueue.reasons import (
    EXCEEDS_MAX_QUOTA,
    NO_MATCHING_FLAVOR,
    least_severe,
    most_severe,
)
from airflow_tfjob.local.model.resources import JsonDict

FIT, PREEMPT, NO_FIT = 0, 1, 2
Usage = dict[tuple[str, str], Decimal]  # (flavor, resource) -> amount
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def quantity(value: Any) -> Decimal:
    try:
        return Decimal(parse_quantity(value))
    except (ValueError, TypeError):
        return Decimal(0)


def render(resource: str, value: Decimal) -> str:
    """pkg/resources/resource_formatter.go: cpu in milli-units (2000m -> 2), memory BinarySI, others plain."""
    if resource == "cpu":
        milli = int(value * 1000)
        return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
    if resource in ("memory", "ephemeral-storage"):
        whole = int(value)
        for suffix, size in _BINARY:
            if whole and whole % size == 0:
                return f"{whole // size}{suffix}"
        return str(whole)
    return str(int(value)) if value == value.to_integral_value() else str(value)


def _container_requests(container: JsonDict) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    # AdjustResources: a limit without a request counts as the request.
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: quantity(value) for name, value in merged.items()}


def pod_requests(template: JsonDict) -> dict[str, Decimal]:
    """resourcehelpers.PodRequests: sum of the containers, at least each init container, plus overhead."""
    spec = template.get("spec") or {}
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for name, value in _container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + value
    for container in spec.get("initContainers") or []:
        for name, value in _container_requests(container).items():
            total[name] = max(total.get(name, Decimal(0)), value)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Decimal(0)) + quantity(value)
    return {k: v for k, v in total.items() if v > 0}


def podset_requests(podset: JsonDict) -> dict[str, Decimal]:
    count = int(podset.get("count", 1))
    return {k: v * count for k, v in pod_requests(podset.get("template") or {}).items()}


def reclaimable(wl: JsonDict) -> dict[str, int]:
    """status.reclaimablePods: pod set name -> pods that finished and no longer need their quota."""
    return {str(r.get("name")): int(r.get("count") or 0)
            for r in (wl.get("status") or {}).get("reclaimablePods") or [] if isinstance(r, dict)}


def effective_podsets(wl: JsonDict) -> list[JsonDict]:
    """The pod sets to find quota for: each count less its reclaimable pods (podSetsCountsAfterReclaim)."""
    done = reclaimable(wl)
    podsets = (wl.get("spec") or {}).get("podSets") or []
    return [{**ps, "count": max(int(ps.get("count", 1)) - done.get(str(ps.get("name")), 0), 0)}
            if done.get(str(ps.get("name"))) else ps for ps in podsets]


def workload_usage(wl: JsonDict) -> Usage:
    """What a Workload holding a reservation uses, from its status.admission, scaled down to the pods
    that are not reclaimable (totalRequestsFromAdmission)."""
    usage: Usage = {}
    done = reclaimable(wl)
    for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
        flavors = psa.get("flavors") or {}
        count = int(psa.get("count") or 0)
        left = count - done.get(str(psa.get("name")), 0)
        scale = Decimal(max(left, 0)) / count if 0 < count and left < count else Decimal(1)
        for resource, amount in (psa.get("resourceUsage") or {}).items():
            flavor = flavors.get(resource)
            if flavor:
                usage[(flavor, resource)] = usage.get((flavor, resource), Decimal(0)) + quantity(amount) * scale
    return usage


def add(into: Usage, other: Usage, sign: int = 1) -> None:
    for k, v in other.items():
        into[k] = into.get(k, Decimal(0)) + sign * v


@dataclass
class Assignment:
    mode: int = FIT
    podsets: list[JsonDict] = field(default_factory=list)
    usage: Usage = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # per pod set: "couldn't assign flavors to ..."
    #: When mode is NO_FIT, Kueue's granular reason (resolveNoFitReason): NoMatchingFlavor or ExceedsMaxQuota.
    no_fit_reason: str = ""

    @property
    def message(self) -> str:
        return "; ".join(self.failures)


def _nominal(cq: JsonDict) -> tuple[dict[str, list[str]], dict[tuple[str, str], Decimal]]:
    """resource -> the flavors of its resource group (in order), and (flavor, resource) -> nominalQuota."""
    flavors_of: dict[str, list[str]] = {}
    nominal: dict[tuple[str, str], Decimal] = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        names = [f.get("name", "") for f in group.get("flavors") or []]
        for resource in group.get("coveredResources") or []:
            flavors_of.setdefault(resource, names)
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                nominal[(flavor.get("name", ""), res.get("name", ""))] = quantity(res.get("nominalQuota", 0))
    return flavors_of, nominal


def _tolerates(toleration: JsonDict, taint: JsonDict) -> bool:
    """Toleration.ToleratesTaint: effect and key match (empty matches any), Exists or an equal value."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return bool(toleration.get("key")) and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taint(template: JsonDict, flavor: JsonDict | None) -> str | None:
    """FindMatchingUntoleratedTaint over the flavor's NoSchedule/NoExecute nodeTaints, against the pod's and
    the flavor's tolerations; the taint as Kubernetes prints it (`key=value:effect`)."""
    spec = (flavor or {}).get("spec") or {}
    tolerations = [*((template.get("spec") or {}).get("tolerations") or []), *(spec.get("tolerations") or [])]
    for taint in spec.get("nodeTaints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"{taint.get('key', '')}{value}:{taint.get('effect')}"
    return None


def _affinity_conflict(template: JsonDict, flavor: JsonDict | None) -> bool:
    selector = (template.get("spec") or {}).get("nodeSelector") or {}
    labels = ((flavor or {}).get("spec") or {}).get("nodeLabels") or {}
    return any(k in selector and selector[k] != v for k, v in labels.items())


def assign(cq: JsonDict, podsets: list[JsonDict], used: Usage, flavors: dict[str, JsonDict]) -> Assignment:
    """findFlavorForPodSets for every pod set: flavors in listed order, the first that fits wins; one
    that fits only by preemption is kept as the fallback (whenCanPreempt: TryNextFlavor)."""
    flavors_of, nominal = _nominal(cq)
    result = Assignment()
    for podset in podsets:
        requests = podset_requests(podset)
        if "pods" in flavors_of:  # a ClusterQueue that covers `pods` counts each pod as one
            requests["pods"] = Decimal(int(podset.get("count", 1)))
        reasons: list[str] = []
        chosen: dict[str, str] = {}
        mode = FIT
        podset_reason = ""
        by_group: dict[tuple[str, ...], list[str]] = {}
        for resource in requests:
            if resource not in flavors_of:
                reasons.append(f"resource {resource} unavailable in ClusterQueue")
                mode = NO_FIT
                podset_reason = most_severe(podset_reason, NO_MATCHING_FLAVOR)  # no flavor was tried
                continue
            by_group.setdefault(tuple(flavors_of[resource]), []).append(resource)
        for group_flavors, resources in by_group.items():
            best: tuple[int, str] | None = None
            flavor_reasons: list[str] = []  # why each flavor of the group could never fit
            for flavor in group_flavors:
                taint = untolerated_taint(podset.get("template") or {}, flavors.get(flavor))
                if taint is not None:
                    reasons.append(f"untolerated taint {taint} in flavor {flavor}")
                    flavor_reasons.append(NO_MATCHING_FLAVOR)
                    continue
                if _affinity_conflict(podset.get("template") or {}, flavors.get(flavor)):
                    reasons.append(f"flavor {flavor} doesn't match node affinity")
                    flavor_reasons.append(NO_MATCHING_FLAVOR)
                    continue
                flavor_mode = FIT
                for resource in resources:
                    earlier = result.usage.get((flavor, resource), Decimal(0))
                    val = earlier + requests[resource]
                    cap = nominal.get((flavor, resource), Decimal(0))
                    available = cap - used.get((flavor, resource), Decimal(0))
                    if val > cap:
                        reasons.append(
                            f"insufficient quota for {resource} in flavor {flavor}, previously considered "
                            f"podsets requests ({render(resource, earlier)}) + current podset request "
                            f"({render(resource, requests[resource])}) > maximum capacity ({render(resource, cap)})")
                        flavor_mode = NO_FIT
                        flavor_reasons.append(EXCEEDS_MAX_QUOTA)
                    elif val > available:
                        reasons.append(f"insufficient unused quota for {resource} in flavor {flavor}, "
                                       f"{render(resource, val - available)} more needed")
                        flavor_mode = max(flavor_mode, PREEMPT)
                if flavor_mode == FIT:
                    best = (FIT, flavor)
                    break
                if flavor_mode == PREEMPT and best is None:
                    best = (PREEMPT, flavor)
            if best is None:
                mode = NO_FIT
                # The flavors are alternatives (the least severe blocker stands), the groups co-requisites.
                podset_reason = most_severe(podset_reason, least_severe(flavor_reasons))
                continue
            mode = max(mode, best[0])
            for resource in resources:
                chosen[resource] = best[1]
        if mode != FIT:
            result.failures.append(f"couldn't assign flavors to pod set {podset.get('name')}: "
                                   + ", ".join(sorted(reasons)))
        result.mode = max(result.mode, mode)
        if mode == NO_FIT:
            result.no_fit_reason = most_severe(result.no_fit_reason, podset_reason)
        usage = {r: requests[r] for r in chosen}
        for resource, flavor in chosen.items():
            result.usage[(flavor, resource)] = result.usage.get((flavor, resource), Decimal(0)) + usage[resource]
        result.podsets.append({"name": podset.get("name"), "flavors": chosen, "count": int(podset.get("count", 1)),
                               "resourceUsage": {r: render(r, v) for r, v in usage.items()}})
    return result
