"""The local cluster's "kubelet" (and scheduler): runs pods as process groups on this host.

What it does, as a node would:

* Scheduling. A Pending pod without `spec.nodeName` is bound to this node (`Scheduled` event,
  condition PodScheduled=True). `nvidia.com/gpu` limits (or requests) are served from the configured
  device list; each pod sees its devices in `CUDA_VISIBLE_DEVICES` (an empty value for pods that ask for
  none, when a list is configured). Without enough free devices the pod stays Pending with
  PodScheduled=False, reason Unschedulable, and a `FailedScheduling` warning; it is bound as soon as
  devices are released.
* Containers. Every container of the pod (init containers first, one at a time) runs its `command` +
  `args` as a local process in its own session and process group. **The image is not pulled and not
  used**: the command runs in this host's environment (its PATH, with the directory of the Python that
  runs the cluster first, so a bare `python` finds its packages), with the host's environment
  variables plus the container's `env` / `envFrom` (values, secretKeyRef, configMapKeyRef, fieldRef
  metadata.name / namespace / uid / labels / annotations, spec.nodeName, status.podIP / hostIP),
  `HOSTNAME` = `spec.hostname` or else the pod name, and `PYTHONUNBUFFERED=1` unless the container sets it, so Python output streams
  live. `$(VAR)` in env values, command and args is expanded as the kubelet does (`$$` escapes). An empty
  `command` runs `args` alone (there is no image entrypoint). `workingDir` is created when missing;
  without one the process starts in the runner's `workdir` (default: the current directory). A missing
  secret/config map leaves the container Waiting with CreateContainerConfigError and is retried.
* Each pod gets its own loopback address `127.0.<a>.<b>` (Linux routes all of 127/8 to `lo`), published
  as `status.podIP` before its processes start. TFJob replicas still talk through the 127.0.0.1 ports in
  their TF_CONFIG (see controllers/v1/tfjob.py).
* Output. stdout and stderr share one pipe (their interleaving is kept); lines go to `PodLogs`, one
  buffer per container run, closed when the process has exited and its output is drained. Long lines are
  kept whole (up to 16 MiB, then split), a last line without newline is kept, bytes are stored undecoded.
* Status. Phase Pending -> Running -> Succeeded/Failed, conditions PodScheduled, Initialized,
  ContainersReady, Ready, and containerStatuses with state waiting/running/terminated, exitCode,
  reason (Completed for 0, OOMKilled for a container killed past its memory limit (memory.py), Error
  otherwise), startedAt/finishedAt, restartCount and lastState. A command that cannot be
  started ends the container with exit code 128, reason StartError, as containerd reports it.
  terminationMessagePolicy FallbackToLogsOnError puts the last lines of a failed run in the message.
* Restarts. restartPolicy OnFailure / Always restart the container in place (restartCount + 1) after a
  back-off of 0.5 s doubling to 8 s (a real kubelet waits 10 s doubling to 5 min); from the second
  restart on the container waits in CrashLoopBackOff meanwhile, and the pod stays Running.
* Deletion. When the store marks a pod with a deletionTimestamp, the whole process group gets SIGTERM,
  then SIGKILL after the grace period (`deletionGracePeriodSeconds`; a repeated delete that shortens it
  brings the SIGKILL forward), the pod gets its final status and `store.finalize_pod_deletion` removes
  it; its logs are forgotten once the object is gone.
* Images are not pulled, except that one from a `.invalid` registry cannot be (images.py): ErrImagePull,
  then ImagePullBackOff, as the kubelet reports them.
* A lost node (`lose_node`): the selected pods die and are removed as the node lifecycle controller, the
  taint-eviction controller and PodGC remove them.
* Headless Services: a record per Service with a running selected pod (dns.py), and one per pod
  whose hostname/subdomain name it under the Service (`<hostname>.<subdomain>`: a JobSet's pods).
* LoadBalancer Services: once a Running pod with an IP matches a Service's selector,
  `status.loadBalancer.ingress = [{"ip": <pod IP>}]` (a one-endpoint load balancer), cleared when none does.
* No orphans. `shutdown()` sends SIGTERM to every process group it started, then SIGKILL, and waits.
  A watchdog process (watchdog.py) kills every group still running when the cluster process dies by
  any signal, SIGKILL included, so the processes a replica started die with it too. Where util-linux
  `setpriv` exists, each container process also gets a parent-death signal (SIGKILL).

This module schedules pods, keeps one `PodRun` per pod and the LoadBalancer statuses; the environment a
container gets is built in podenv.py, its processes are supervised in podrun.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_tfjob.constants import GPU_RESOURCE
from airflow_tfjob.local.model.resources import ApiError, now_rfc3339
from airflow_tfjob.local.node.dns import LocalDns
from airflow_tfjob.local.node.podenv import HOST_IP, IpPool, expand, gpu_request
from airflow_tfjob.local.node.podlogs import PodLogs
from airflow_tfjob.local.node.podrun import PodRun, killpg
from airflow_tfjob.local.node.watchdog import ProcessGroups
from airflow_tfjob.local.store.core import Store
from airflow_tfjob.local.store.events import record_event
from airflow_tfjob.local.store.watchers import follow_forever

log = logging.getLogger(__name__)

JsonDict = dict[str, Any]

_SHUTDOWN_GRACE = 3.0


class Runner:
    """Binds pending pods to this node and runs them as local process groups."""

    def __init__(
        self,
        store: Store,
        podlogs: PodLogs,
        *,
        node_name: str = "local",
        gpus: list[str] | None = None,
        workdir: Path | None = None,
    ) -> None:
        self.store = store
        self.podlogs = podlogs
        self.node_name = node_name
        self.gpus_configured = gpus is not None and len(gpus) > 0
        self._free_gpus: list[str] = list(gpus or [])
        self._assigned_gpus: dict[str, list[str]] = {}
        self._waiting: dict[str, tuple[str, str]] = {}
        self.workdir = workdir
        self._runs: dict[str, PodRun] = {}
        self._lost: set[str] = set()  # uids of pods whose node was lost (lose_node): nobody runs them
        self._ips = IpPool()
        self._tasks: list[asyncio.Task[None]] = []
        # Process groups we started whose members may still be alive.
        self.groups = ProcessGroups()
        self.setpriv = shutil.which("setpriv")
        dns_root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="tfjob-local-runner-"))
        self.dns = LocalDns(dns_root / ".dns")
        # The node's stand-in for PersistentVolumeClaims: one host directory per namespace and claim.
        self.volumes_dir = dns_root / "volumes"

    # ---- loop

    async def run(self) -> None:
        """Run pods until cancelled."""
        self._tasks = [
            asyncio.create_task(self._watch("pods", self._on_pod), name="runner-watch-pods"),
            asyncio.create_task(self._watch("services", self._on_service), name="runner-watch-services"),
        ]
        try:
            await asyncio.gather(*self._tasks)
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _watch(self, rtype: str, handler: Callable[[str, JsonDict], None]) -> None:
        await follow_forever(self.store, rtype, handler, "runner")

    async def shutdown(self) -> None:
        """Stop every process this runner started: SIGTERM to each group, SIGKILL after a grace, wait."""
        for task in self._tasks:
            task.cancel()
        runs = list(self._runs.values())
        for run in runs:
            run.stop_all(signal.SIGTERM)
        waits = [run.main_task for run in runs if run.main_task is not None]
        if waits:
            _done, pending = await asyncio.wait(waits, timeout=_SHUTDOWN_GRACE)
            if pending:
                for run in runs:
                    run.stop_all(signal.SIGKILL)
                await asyncio.wait(pending, timeout=_SHUTDOWN_GRACE)
        for pgid in self.groups:
            killpg(pgid, signal.SIGKILL)
        for run in runs:
            run.cancel()
        self.groups.close()

    # ---- pods

    def _on_pod(self, etype: str, pod: JsonDict) -> None:
        meta = pod.get("metadata", {})
        uid = meta.get("uid", "")
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        if uid in self._lost:
            if etype == "DELETED":
                self._lost.discard(uid)
            return  # its node is gone: no kubelet confirms its deletion or runs it
        if etype == "DELETED":
            self._waiting.pop(uid, None)
            run = self._runs.pop(uid, None)
            if run is not None:
                run.removed()
                self._ips.give(run.pod_ip)
            self.podlogs.forget_pod(ns, name)
            spec = pod.get("spec") or {}
            if spec.get("hostname") and spec.get("subdomain"):
                self.dns.publish(ns, f"{spec['hostname']}.{spec['subdomain']}", [])
            self._release_gpus(uid)
            self._sync_services(ns, meta.get("labels") or {})
            return
        node = pod.get("spec", {}).get("nodeName")
        if not node:
            if not meta.get("deletionTimestamp"):
                self._schedule(pod)
            return
        if node != self.node_name:
            return
        run = self._runs.get(uid)
        if run is None:
            if meta.get("deletionTimestamp") or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                # Not ours to run (finished before we started): only the removal is left to do.
                if meta.get("deletionTimestamp"):
                    self.store.finalize_pod_deletion(ns, name)
                return
            run = PodRun(self, pod, self._ips.take(), self._assigned_gpus.get(uid, []))
            self._runs[uid] = run
            run.start()
        if meta.get("deletionTimestamp"):
            grace = meta.get("deletionGracePeriodSeconds")
            if grace is None:
                grace = pod.get("spec", {}).get("terminationGracePeriodSeconds", 30)
            run.terminate(float(grace))

    def _schedule(self, pod: JsonDict) -> None:
        meta = pod["metadata"]
        uid, ns, name = meta["uid"], meta["namespace"], meta["name"]
        need = gpu_request(pod)
        if need > len(self._free_gpus):
            if uid not in self._waiting:
                self._waiting[uid] = (ns, name)
                msg = f"0/1 nodes are available: 1 Insufficient {GPU_RESOURCE}."
                status = dict(pod.get("status") or {})
                status["phase"] = "Pending"
                status["conditions"] = [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "lastProbeTime": None,
                        "lastTransitionTime": now_rfc3339(),
                        "reason": "Unschedulable",
                        "message": msg,
                    }
                ]
                with contextlib.suppress(ApiError):
                    self.store.update_status("pods", ns, name, status)
                    record_event(self.store, pod, "Warning", "FailedScheduling", msg, "default-scheduler")
            return
        self._waiting.pop(uid, None)
        if need:
            self._assigned_gpus[uid] = self._free_gpus[:need]
            del self._free_gpus[:need]
        try:
            self.store.patch("pods", ns, name, {"spec": {"nodeName": self.node_name}}, "merge")
        except ApiError:
            self._release_gpus(uid)
            return
        with contextlib.suppress(ApiError):
            record_event(
                self.store,
                pod,
                "Normal",
                "Scheduled",
                f"Successfully assigned {ns}/{name} to {self.node_name}",
                "default-scheduler",
            )

    def _release_gpus(self, uid: str) -> None:
        devices = self._assigned_gpus.pop(uid, None)
        if not devices:
            return
        self._free_gpus.extend(devices)
        for waiting_uid, (ns, name) in list(self._waiting.items()):
            try:
                pod = self.store.get("pods", ns, name)
            except ApiError:
                self._waiting.pop(waiting_uid, None)
                continue
            if gpu_request(pod) <= len(self._free_gpus):
                self._waiting.pop(waiting_uid, None)
                self._schedule(pod)

    def pod_finished(self, uid: str) -> None:
        """A pod reached Succeeded/Failed: its devices go back to the pool, as the kubelet's do."""
        self._release_gpus(uid)

    def pod_phase_changed(self, namespace: str, labels: dict[str, str]) -> None:
        self._sync_services(namespace, labels)

    # ---- a node lost

    async def lose_node(self, label_selector: str | None = None, *, step: float = 0.3) -> list[str]:
        """The node of the running pods that `label_selector` selects (None: every pod here) stops
        answering, as the cluster's controllers report it; returns "namespace/name" of the lost pods.

        The machine is gone: the pods' processes die (SIGKILL) and nothing reports their end. Then, as a
        real cluster does over minutes (here `step` seconds apart): the node lifecycle controller marks
        each pod not ready (event NodeNotReady); the taint-eviction controller adds the condition
        DisruptionTarget (reason DeletionByTaintManager) and deletes the pod, which stays Terminating
        in phase Running since no kubelet confirms it; PodGC, once the node object is gone, sets the
        pod Failed and force-deletes it. The node's replacement (same name) runs new pods at once.
        """
        lost = []
        for uid, run in list(self._runs.items()):
            pod = self._current(run.namespace, run.name)
            labels = (pod or {}).get("metadata", {}).get("labels") or {}
            if pod is None or (label_selector is not None and not _matches(labels, label_selector)):
                continue
            run.lost = True
            self._lost.add(uid)
            del self._runs[uid]
            run.stop_all(signal.SIGKILL)
            self._release_gpus(uid)
            lost.append((run, pod))
        for run, pod in lost:
            self._mark(run, pod, [("Ready", "False", "", "")])
            record_event(self.store, pod, "Warning", "NodeNotReady", "Node is not ready", "node-controller")
        await asyncio.sleep(step)
        for run, pod in lost:
            reason, message = "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint"
            self._mark(run, self._current(run.namespace, run.name) or pod, [("DisruptionTarget", "True", reason, message)])
            record_event(self.store, pod, "Normal", "TaintManagerEviction",
                         f"Marking for deletion Pod {run.namespace}/{run.name}", "taint-eviction-controller")
            with contextlib.suppress(ApiError):
                self.store.delete("pods", run.namespace, run.name)
        await asyncio.sleep(step)
        for run, _pod in lost:
            current = self._current(run.namespace, run.name)
            if current is not None:
                self._mark(run, current, [], phase="Failed")
                self.store.finalize_pod_deletion(run.namespace, run.name)
            self._ips.give(run.pod_ip)
            self.podlogs.forget_pod(run.namespace, run.name)
        return [f"{run.namespace}/{run.name}" for run, _ in lost]

    def _current(self, namespace: str, name: str) -> JsonDict | None:
        try:
            return self.store.get("pods", namespace, name)
        except ApiError:
            return None

    def _mark(self, run: PodRun, pod: JsonDict, conditions: list[tuple[str, str, str, str]],
              phase: str | None = None) -> None:
        """Set conditions (type, status, reason, message) and the phase of a lost pod's status."""
        status = dict(pod.get("status") or {})
        kept = [c for c in status.get("conditions") or [] if c.get("type") not in {t for t, *_ in conditions}]
        for ctype, cstatus, reason, message in conditions:
            cond: JsonDict = {"type": ctype, "status": cstatus, "lastProbeTime": None,
                              "lastTransitionTime": now_rfc3339()}
            if reason:
                cond.update({"reason": reason, "message": message})
            kept.append(cond)
        status["conditions"] = kept
        if phase is not None:
            status["phase"] = phase
        with contextlib.suppress(ApiError):
            self.store.update_status("pods", run.namespace, run.name, status)

    # ---- Services: LoadBalancer ingress and headless Services' DNS records

    def _on_service(self, etype: str, svc: JsonDict) -> None:
        spec = svc.get("spec") or {}
        if spec.get("clusterIP") == "None":
            meta = svc["metadata"]
            ips = [] if etype == "DELETED" else self._ready_ips(meta["namespace"], spec.get("selector") or {})
            self.dns.publish(meta["namespace"], meta["name"], ips)
            if etype != "DELETED":
                self._publish_hostnames(meta["namespace"], meta["name"], spec.get("selector") or {})
        elif etype != "DELETED" and spec.get("type") == "LoadBalancer":
            self._sync_service(svc)

    def _sync_services(self, namespace: str, labels: dict[str, str]) -> None:
        """After a change of the pod with `labels`: the Services whose selector matches it."""
        try:
            services, _ = self.store.list("services", namespace)
        except ApiError:
            return
        for svc in services:
            spec = svc.get("spec") or {}
            selector = spec.get("selector") or {}
            if not selector or any(labels.get(k) != v for k, v in selector.items()):
                continue
            if spec.get("type") == "LoadBalancer" or spec.get("clusterIP") == "None":
                self._on_service("MODIFIED", svc)

    def _ready_ips(self, namespace: str, selector: dict[str, str]) -> list[str]:
        """The IPs of the Running pods (not terminating) that a Service's selector matches."""
        if not selector:
            return []
        expr = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        try:
            pods, _ = self.store.list("pods", namespace, label_selector=expr)
        except ApiError:
            return []
        return [
            pod["status"]["podIP"]
            for pod in pods
            if (pod.get("status") or {}).get("phase") == "Running"
            and pod["status"].get("podIP")
            and not pod["metadata"].get("deletionTimestamp")
        ]

    def _publish_hostnames(self, namespace: str, service: str, selector: dict[str, str]) -> None:
        """`<hostname>.<service>` of each selected pod whose subdomain is the Service (a JobSet's pods):
        a record while the pod runs, none otherwise, as cluster DNS answers for a headless Service."""
        if not selector:
            return
        expr = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        with contextlib.suppress(ApiError):
            pods, _ = self.store.list("pods", namespace, label_selector=expr)
            for pod in pods:
                spec, status = pod.get("spec") or {}, pod.get("status") or {}
                if spec.get("hostname") and spec.get("subdomain") == service:
                    running = (status.get("phase") == "Running" and status.get("podIP")
                               and not pod["metadata"].get("deletionTimestamp"))
                    self.dns.publish(namespace, f"{spec['hostname']}.{service}", [status["podIP"]] if running else [])

    def _sync_service(self, svc: JsonDict) -> None:
        """A one-endpoint load balancer: the first ready pod's IP is the ingress."""
        meta = svc["metadata"]
        ips = self._ready_ips(meta["namespace"], svc.get("spec", {}).get("selector") or {})
        status = dict(svc.get("status") or {})
        want: JsonDict = {"ingress": [{"ip": ips[0]}]} if ips else {}
        if status.get("loadBalancer") != want:
            status["loadBalancer"] = want
            with contextlib.suppress(ApiError):
                self.store.update_status("services", meta["namespace"], meta["name"], status)


def _matches(labels: dict[str, str], selector: str) -> bool:
    """Equality-based selector ("a=b,c=d"), as lose_node takes it."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        key, _, value = term.partition("=")
        if labels.get(key.strip()) != value.strip().lstrip("="):
            return False
    return True


__all__ = ["HOST_IP", "Runner", "expand", "gpu_request"]
