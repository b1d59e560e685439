"""API-server defaults for core kinds: what clients read back from a real cluster after a create or an
update (pod and container defaults, service cluster IPs, namespace phase, secret type)."""

from __future__ import annotations

import base64

from airflow_tfjob.local.model.bodies import object_meta
from airflow_tfjob.local.model.resources import JsonDict


def _default_pod(pod: JsonDict) -> None:
    spec = pod.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    if not spec.get("restartPolicy"):  # Go defaults the empty string too
        spec["restartPolicy"] = "Always"
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("serviceAccountName", spec.get("serviceAccount", "default"))
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault(
        "tolerations",
        [
            {"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            for t in ("not-ready", "unreachable")
        ],
    )
    requests_any = limits_any = False
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            if not isinstance(container, dict):
                continue
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            image = str(container.get("image", ""))
            tag = image.rsplit("/", 1)[-1]
            pull = "Always" if ":" not in tag or tag.endswith(":latest") else "IfNotPresent"
            if "@" in image:
                pull = "IfNotPresent"
            container.setdefault("imagePullPolicy", pull)
            resources = container.setdefault("resources", {})
            if isinstance(resources, dict):
                requests_any = requests_any or bool(resources.get("requests"))
                limits_any = limits_any or bool(resources.get("limits"))
            for port in container.get("ports") or []:
                if isinstance(port, dict) and not port.get("protocol"):
                    port["protocol"] = "TCP"
            for env in container.get("env") or []:
                ref = env.get("valueFrom", {}).get("fieldRef") if isinstance(env, dict) else None
                if isinstance(ref, dict):
                    ref.setdefault("apiVersion", "v1")
    status = pod.setdefault("status", {})
    if isinstance(status, dict):
        status.setdefault("phase", "Pending")
        status.setdefault("qosClass", "Burstable" if requests_any or limits_any else "BestEffort")


_service_ips = iter(range(1, 1 << 16))


def _default_service(svc: JsonDict) -> None:
    spec = svc.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if "clusterIP" not in spec and spec["type"] != "ExternalName":
        n = next(_service_ips)
        spec["clusterIP"] = f"10.96.{n >> 8}.{n & 255}"
    if "clusterIP" in spec:
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            if "port" in port:
                port.setdefault("targetPort", port["port"])
    svc.setdefault("status", {"loadBalancer": {}})


def _default_namespace(ns: JsonDict, name: str) -> None:
    meta = object_meta(ns)
    labels = meta.setdefault("labels", {})
    if isinstance(labels, dict):
        labels["kubernetes.io/metadata.name"] = name
    ns.setdefault("spec", {"finalizers": ["kubernetes"]})
    ns["status"] = {"phase": "Active"}


def _default_secret(secret: JsonDict) -> None:
    secret.setdefault("type", "Opaque")
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict):
        data = secret.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def _default_job(job: JsonDict) -> None:
    """batch/v1 Job: the API server's defaults and the selector and labels it derives from the uid."""
    spec = job.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("parallelism", 1)
    spec.setdefault("completions", spec["parallelism"] if spec["completionMode"] == "Indexed" else 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("suspend", False)
    spec.setdefault("manualSelector", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    uid = object_meta(job).get("uid", "")
    name = object_meta(job).get("name", "")
    template = spec.setdefault("template", {})
    if isinstance(template, dict) and uid:
        spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        for prefix in ("batch.kubernetes.io/", ""):
            labels.setdefault(f"{prefix}controller-uid", uid)
            labels.setdefault(f"{prefix}job-name", name)
        if not object_meta(job).get("labels"):  # a Job without labels takes its template's
            object_meta(job)["labels"] = dict(labels)


def apply_core_defaults(rtype: str, obj: JsonDict, name: str) -> None:
    if rtype == "pods":
        _default_pod(obj)
    elif rtype == "services":
        _default_service(obj)
    elif rtype == "namespaces":
        _default_namespace(obj, name)
    elif rtype == "secrets":
        _default_secret(obj)
    elif rtype == "jobs":
        _default_job(obj)
