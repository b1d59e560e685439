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
  `HOSTNAME` = pod name, and `PYTHONUNBUFFERED=1` unless the container sets it, so Python output streams
  live. `$(VAR)` in env values, command and args is expanded as the kubelet does (`$$` escapes). An empty
  `command` runs `args` alone (there is no image entrypoint). `workingDir` is created when missing;
  without one the process starts in the runner's `workdir` (default: the current directory). A missing
  secret/config map leaves the container Waiting with CreateContainerConfigError and is retried.
* Each pod gets its own loopback address `127.0.<a>.<b>` (Linux routes all of 127/8 to `lo`), published
  as `status.podIP` before its processes start. TFJob replicas still talk through the 127.0.0.1 ports in
  their TF_CONFIG (see controller.py).
* Output. stdout and stderr share one pipe (their interleaving is kept); lines go to `PodLogs`, one
  buffer per container run, closed when the process has exited and its output is drained. Long lines are
  kept whole (up to 16 MiB, then split), a last line without newline is kept, bytes are stored undecoded.
* Status. Phase Pending -> Running -> Succeeded/Failed, conditions PodScheduled, Initialized,
  ContainersReady, Ready, and containerStatuses with state waiting/running/terminated, exitCode,
  reason (Completed for 0, Error otherwise: an exit by SIGKILL is 137/Error, never OOMKilled, because no
  memory limit is enforced), startedAt/finishedAt, restartCount and lastState. A command that cannot be
  started ends the container with exit code 128, reason StartError, as containerd reports it.
  terminationMessagePolicy FallbackToLogsOnError puts the last lines of a failed run in the message.
* Restarts. restartPolicy OnFailure / Always restart the container in place (restartCount + 1) after a
  back-off of 0.5 s doubling to 8 s (a real kubelet waits 10 s doubling to 5 min); from the second
  restart on the container waits in CrashLoopBackOff meanwhile, and the pod stays Running.
* Deletion. When the store marks a pod with a deletionTimestamp, the whole process group gets SIGTERM,
  then SIGKILL after the grace period (`deletionGracePeriodSeconds`; a repeated delete that shortens it
  brings the SIGKILL forward), the pod gets its final status and `store.finalize_pod_deletion` removes
  it; its logs are forgotten once the object is gone.
* LoadBalancer Services: once a Running pod with an IP matches a Service's selector,
  `status.loadBalancer.ingress = [{"ip": <pod IP>}]` (a one-endpoint load balancer), cleared when none does.
* No orphans. `shutdown()` sends SIGTERM to every process group it started, then SIGKILL, and waits.
  A watchdog process (watchdog.py) kills every group still running when the cluster process dies by
  any signal, SIGKILL included, so the processes a replica started die with it too. Where util-linux
  `setpriv` exists, each container process also gets a parent-death signal (SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import re
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_tfjob.constants import GPU_RESOURCE
from airflow_tfjob.local.podlogs import ContainerLog, PodLogs
from airflow_tfjob.local.store import ApiError, Store, record_event
from airflow_tfjob.local.watchdog import ProcessGroups

log = logging.getLogger(__name__)

JsonDict = dict[str, Any]

HOST_IP = "127.0.0.1"
_CHUNK = 65536
_MAX_LINE = 16 * 1024 * 1024
_BACKOFF_BASE = 0.5
_BACKOFF_MAX = 8.0
_CONFIG_RETRY = 1.0
_DRAIN_TIMEOUT = 2.0
_SHUTDOWN_GRACE = 3.0
_FALLBACK_LINES = 80
_FALLBACK_BYTES = 2048
_VAR_REF = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def expand(value: str, variables: dict[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: defined names are replaced, `$$` gives `$`, the rest stays."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return variables[name] if name in variables else m.group(0)

    return _VAR_REF.sub(sub, value)


def gpu_request(pod: JsonDict) -> int:
    total = 0
    for c in pod.get("spec", {}).get("containers") or []:
        res = c.get("resources") or {}
        value = (res.get("limits") or {}).get(GPU_RESOURCE, (res.get("requests") or {}).get(GPU_RESOURCE, 0))
        try:
            total += int(str(value))
        except ValueError:
            continue
    return total


class _ConfigError(Exception):
    """The container's configuration cannot be resolved yet (missing secret, config map or key)."""


class _IpPool:
    """Loopback addresses 127.0.1.1 ... 127.0.255.254, one per running pod."""

    def __init__(self) -> None:
        self._free: list[str] = []
        self._next = 256 + 1

    def take(self) -> str:
        if self._free:
            return self._free.pop(0)
        n = self._next
        self._next += 1
        if n % 256 in (0, 255):
            return self.take()
        return f"127.0.{n >> 8}.{n & 255}"

    def give(self, ip: str) -> None:
        self._free.append(ip)


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
        self._runs: dict[str, _PodRun] = {}
        self._ips = _IpPool()
        self._tasks: list[asyncio.Task[None]] = []
        # Process groups we started whose members may still be alive.
        self.groups = ProcessGroups()
        self.setpriv = shutil.which("setpriv")

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
        while True:
            watcher = self.store.watch(rtype)
            try:
                async for etype, obj in watcher:
                    try:
                        handler(etype, obj)
                    except Exception:
                        log.exception(
                            "runner: handling %s %s failed", rtype, obj.get("metadata", {}).get("name")
                        )
            finally:
                watcher.close()
            await asyncio.sleep(0.1)

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
            _killpg(pgid, signal.SIGKILL)
        for run in runs:
            run.cancel()
        self.groups.close()

    # ---- pods

    def _on_pod(self, etype: str, pod: JsonDict) -> None:
        meta = pod.get("metadata", {})
        uid = meta.get("uid", "")
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        if etype == "DELETED":
            self._waiting.pop(uid, None)
            run = self._runs.pop(uid, None)
            if run is not None:
                run.removed()
                self._ips.give(run.pod_ip)
            self.podlogs.forget_pod(ns, name)
            self._release_gpus(uid)
            self._sync_load_balancers(ns)
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
            run = _PodRun(self, pod, self._ips.take(), self._assigned_gpus.get(uid, []))
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
                        "lastTransitionTime": _now(),
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

    def pod_phase_changed(self, namespace: str) -> None:
        self._sync_load_balancers(namespace)

    # ---- LoadBalancer services

    def _on_service(self, etype: str, svc: JsonDict) -> None:
        if etype != "DELETED" and svc.get("spec", {}).get("type") == "LoadBalancer":
            self._sync_service(svc)

    def _sync_load_balancers(self, namespace: str) -> None:
        try:
            services, _ = self.store.list("services", namespace)
        except ApiError:
            return
        for svc in services:
            if svc.get("spec", {}).get("type") == "LoadBalancer":
                self._sync_service(svc)

    def _sync_service(self, svc: JsonDict) -> None:
        meta = svc["metadata"]
        selector = svc.get("spec", {}).get("selector") or {}
        ip = None
        if selector:
            expr = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
            try:
                pods, _ = self.store.list("pods", meta["namespace"], label_selector=expr)
            except ApiError:
                pods = []
            for pod in pods:
                st = pod.get("status") or {}
                if (
                    st.get("phase") == "Running"
                    and st.get("podIP")
                    and not pod["metadata"].get("deletionTimestamp")
                ):
                    ip = st["podIP"]
                    break
        status = dict(svc.get("status") or {})
        want: JsonDict = {"ingress": [{"ip": ip}]} if ip else {}
        if status.get("loadBalancer") != want:
            status["loadBalancer"] = want
            with contextlib.suppress(ApiError):
                self.store.update_status("services", meta["namespace"], meta["name"], status)


# --------------------------------------------------------------------------------------------------


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class _ContainerState:
    """What the kubelet reports for one container, plus the process running it."""

    def __init__(self, spec: JsonDict) -> None:
        self.spec = spec
        self.name: str = spec.get("name", "")
        self.state: JsonDict = {"waiting": {"reason": "ContainerCreating"}}
        self.last_state: JsonDict = {}
        self.restart_count = 0
        self.ready = False
        self.started = False
        self.final = False  # terminated and not going to restart
        self.container_id = ""
        self.proc: asyncio.subprocess.Process | None = None
        self.log: ContainerLog | None = None

    def status(self) -> JsonDict:
        out: JsonDict = {
            "name": self.name,
            "state": self.state,
            "lastState": self.last_state,
            "ready": self.ready,
            "restartCount": self.restart_count,
            "image": self.spec.get("image", ""),
            "imageID": "",
            "started": self.started,
        }
        if self.container_id:
            out["containerID"] = self.container_id
        return out

    def exit_code(self) -> int | None:
        term = self.state.get("terminated")
        return None if term is None else int(term["exitCode"])


class _PodRun:
    """One pod on this node: its containers' processes and the status the kubelet reports."""

    def __init__(self, runner: Runner, pod: JsonDict, pod_ip: str, gpus: list[str]) -> None:
        self.runner = runner
        self.store = runner.store
        self.pod = pod
        meta = pod["metadata"]
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self.uid: str = meta["uid"]
        self.pod_ip = pod_ip
        self.gpus = gpus
        spec = pod.get("spec") or {}
        self.restart_policy: str = spec.get("restartPolicy", "Always")
        self.init = [_ContainerState(c) for c in spec.get("initContainers") or []]
        self.containers = [_ContainerState(c) for c in spec.get("containers") or []]
        self.init_done = not self.init
        self.init_failed = False
        self.start_time = _now()
        self.conditions: dict[str, JsonDict] = {}
        self.phase = "Pending"
        self.terminating = asyncio.Event()
        self.main_task: asyncio.Task[None] | None = None
        self._terminate_task: asyncio.Task[None] | None = None
        self._kill_at: float | None = None  # loop time of the SIGKILL; a repeated delete may bring it closer
        self._kill_at_changed = asyncio.Event()
        self._base_status = dict(pod.get("status") or {})

    # ---- lifecycle

    def start(self) -> None:
        self.main_task = asyncio.create_task(self._main(), name=f"pod-{self.namespace}-{self.name}")

    async def _main(self) -> None:
        self._write()
        for c in self.init:
            if not await self._init_container(c):
                break
        else:
            self.init_done = True
            self._write()
            if self.containers:
                await asyncio.gather(*(self._container_loop(c) for c in self.containers))
        self._write()
        if self.phase in ("Succeeded", "Failed"):
            self.runner.pod_finished(self.uid)

    async def _init_container(self, c: _ContainerState) -> bool:
        while True:
            code = await self._run_once(c)
            if code is None or self.terminating.is_set():
                return False
            if code == 0:
                c.final = True
                return True
            if self.restart_policy == "Never":
                c.final = True
                self.init_failed = True
                return False
            if not await self._back_off(c):
                return False

    async def _container_loop(self, c: _ContainerState) -> None:
        while True:
            code = await self._run_once(c)
            if code is None or self.terminating.is_set():
                c.final = True
                return
            restart = self.restart_policy == "Always" or (self.restart_policy == "OnFailure" and code != 0)
            if not restart:
                c.final = True
                return
            if not await self._back_off(c):
                c.final = True
                return

    async def _back_off(self, c: _ContainerState) -> bool:
        """Wait before an in-place restart; False if the pod is being deleted meanwhile."""
        delay = min(_BACKOFF_BASE * (2**c.restart_count), _BACKOFF_MAX)
        if c.restart_count >= 1:
            c.last_state = c.state
            msg = f"back-off {delay:g}s restarting failed container={c.name} pod={self.name}_{self.namespace}({self.uid})"
            c.state = {"waiting": {"reason": "CrashLoopBackOff", "message": msg}}
            self._event(
                "Warning",
                "BackOff",
                f"Back-off restarting failed container {c.name} in pod {self.name}_{self.namespace}({self.uid})",
            )
            self._write()
        if await self._wait_terminating(delay):
            return False
        if "terminated" in c.state:
            c.last_state = c.state
        c.restart_count += 1
        return True

    async def _wait_terminating(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self.terminating.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def _run_once(self, c: _ContainerState) -> int | None:
        """Start the container's process and wait for it; its exit code, or None if never started
        because the pod is being deleted."""
        while True:
            if self.terminating.is_set():
                return None
            try:
                env, variables = self._environment(c.spec)
                break
            except _ConfigError as exc:
                c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}
                self._write()
                if await self._wait_terminating(_CONFIG_RETRY):
                    return None
        argv = [
            expand(str(a), variables) for a in [*(c.spec.get("command") or []), *(c.spec.get("args") or [])]
        ]
        cwd = self._working_dir(c.spec)
        started = _now()
        c.log = self.runner.podlogs.start_instance(self.namespace, self.name, c.name)
        error = self._check_executable(argv, env)
        proc = None
        if error is None:
            if self.runner.setpriv:
                argv = [self.runner.setpriv, "--pdeathsig", "KILL", "--", *argv]
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    env=env,
                    cwd=cwd,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                error = f"exec: {exc.strerror}"
        if proc is None:
            c.log.close()
            message = f"failed to create containerd task: failed to create shim task: OCI runtime create failed: unable to start container process: {error}: unknown"
            c.state = {
                "terminated": {
                    "exitCode": 128,
                    "reason": "StartError",
                    "message": message,
                    "startedAt": "1970-01-01T00:00:00Z",
                    "finishedAt": _now(),
                }
            }
            c.ready = False
            self._event("Warning", "Failed", f"Error: {message}")
            self._write()
            return 128
        c.proc = proc
        self.runner.groups.add(proc.pid)
        c.container_id = f"local://{proc.pid}"
        c.state = {"running": {"startedAt": started}}
        c.started = True
        c.ready = True
        self._event("Normal", "Created", f"Created container {c.name}")
        self._event("Normal", "Started", f"Started container {c.name}")
        self._write()
        assert proc.stdout is not None
        pump = asyncio.create_task(_pump(proc.stdout, c.log))
        rc = await proc.wait()
        # The container's init process is gone: like a PID namespace, take the rest of the group along.
        _killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(pump), _DRAIN_TIMEOUT)
        pump.cancel()
        self.runner.groups.discard(proc.pid)
        c.log.close()
        c.proc = None
        code = rc if rc >= 0 else 128 - rc
        term: JsonDict = {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}
        if code != 0 and c.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            term["message"] = _tail_message(c.log)
        term.update({"startedAt": started, "finishedAt": _now(), "containerID": c.container_id})
        c.state = {"terminated": term}
        c.ready = False
        self._write()
        return code

    # ---- termination

    def terminate(self, grace: float) -> None:
        kill_at = asyncio.get_running_loop().time() + max(grace, 0.0)
        if self._kill_at is None or kill_at < self._kill_at:
            self._kill_at = kill_at
            self._kill_at_changed.set()
        if self._terminate_task is None:
            self._terminate_task = asyncio.create_task(self._terminate())

    async def _terminate(self) -> None:
        self.terminating.set()
        for c in [*self.init, *self.containers]:
            if c.proc is not None:
                self._event("Normal", "Killing", f"Stopping container {c.name}")
        self.stop_all(signal.SIGTERM)
        if self.main_task is not None:
            try:
                await self._wait_exit_or_kill(self.main_task)
            except Exception:
                log.exception("pod %s/%s", self.namespace, self.name)
        self.store.finalize_pod_deletion(self.namespace, self.name)

    async def _wait_exit_or_kill(self, main: asyncio.Task[None]) -> None:
        """Wait for the processes to exit after SIGTERM; SIGKILL them at the (possibly shortened) deadline."""
        loop = asyncio.get_running_loop()
        while not main.done():
            assert self._kill_at is not None
            remaining = self._kill_at - loop.time()
            if remaining <= 0:
                self.stop_all(signal.SIGKILL)
                break
            self._kill_at_changed.clear()
            changed = asyncio.ensure_future(self._kill_at_changed.wait())
            await asyncio.wait({main, changed}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
        with contextlib.suppress(Exception):
            await main

    def stop_all(self, sig: int) -> None:
        self.terminating.set()
        for c in [*self.init, *self.containers]:
            if c.proc is not None:
                _killpg(c.proc.pid, sig)

    def removed(self) -> None:
        """The pod object is gone (deleted at once, or finalized): nothing of it may keep running."""
        self.stop_all(signal.SIGKILL)

    def cancel(self) -> None:
        for task in (self.main_task, self._terminate_task):
            if task is not None:
                task.cancel()

    # ---- environment

    def _field(self, path: str) -> str:
        meta = self.pod["metadata"]
        m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
        if m:
            return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
        simple = {
            "metadata.name": self.name,
            "metadata.namespace": self.namespace,
            "metadata.uid": self.uid,
            "spec.nodeName": self.runner.node_name,
            "spec.serviceAccountName": self.pod.get("spec", {}).get("serviceAccountName", "default"),
            "status.podIP": self.pod_ip,
            "status.podIPs": self.pod_ip,
            "status.hostIP": HOST_IP,
            "status.hostIPs": HOST_IP,
        }
        if path not in simple:
            raise _ConfigError(f"unsupported fieldPath: {path}")
        return simple[path]

    def _lookup(self, kind: str, name: str, key: str | None, optional: bool) -> dict[str, str] | str | None:
        rtype = "secrets" if kind == "Secret" else "configmaps"
        try:
            obj = self.store.get(rtype, self.namespace, name)
        except ApiError:
            if optional:
                return None
            raise _ConfigError(f'{kind.lower()} "{name}" not found') from None
        data: dict[str, str] = {}
        if kind == "Secret":
            import base64

            for k, v in (obj.get("data") or {}).items():
                data[k] = base64.b64decode(v).decode(errors="replace")
        else:
            data.update(obj.get("data") or {})
        if key is None:
            return data
        if key not in data:
            if optional:
                return None
            raise _ConfigError(f"couldn't find key {key} in {kind} {self.namespace}/{name}")
        return data[key]

    def _environment(self, spec: JsonDict) -> tuple[dict[str, str], dict[str, str]]:
        """(process environment, the container's own variables used for $(VAR) expansion)."""
        own: dict[str, str] = {}
        for source in spec.get("envFrom") or []:
            prefix = source.get("prefix", "")
            for kind, field in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                ref = source.get(field)
                if ref:
                    found = self._lookup(kind, ref.get("name", ""), None, bool(ref.get("optional")))
                    if isinstance(found, dict):
                        own.update({prefix + k: v for k, v in found.items()})
        for item in spec.get("env") or []:
            name = item.get("name", "")
            if "valueFrom" not in item:
                own[name] = expand(str(item.get("value", "")), own)
                continue
            source = item["valueFrom"] or {}
            value: Any = None
            if "fieldRef" in source:
                value = self._field(source["fieldRef"].get("fieldPath", ""))
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                value = self._lookup(
                    "Secret", ref.get("name", ""), ref.get("key", ""), bool(ref.get("optional"))
                )
            elif "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                value = self._lookup(
                    "ConfigMap", ref.get("name", ""), ref.get("key", ""), bool(ref.get("optional"))
                )
            elif "resourceFieldRef" in source:
                value = self._resource_field(spec, source["resourceFieldRef"])
            if isinstance(value, str):
                own[name] = value
        env = dict(os.environ)
        # The "image" is this host's environment: put the interpreter the cluster runs on first, so that a
        # replica's bare `python` (as written for a real image) finds the same packages (TensorFlow).
        interpreter_dir = os.path.dirname(sys.executable)
        env["PATH"] = os.pathsep.join([interpreter_dir, env.get("PATH", os.defpath)])
        env["HOSTNAME"] = self.name
        env["PYTHONUNBUFFERED"] = "1"
        if self.gpus or self.runner.gpus_configured:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus)
        env.update(own)
        return env, own

    @staticmethod
    def _resource_field(spec: JsonDict, ref: JsonDict) -> str:
        resource = str(ref.get("resource", ""))
        section, _, name = resource.partition(".")
        value = ((spec.get("resources") or {}).get(section) or {}).get(name)
        return "0" if value is None else str(value)

    def _working_dir(self, spec: JsonDict) -> str | None:
        wd = spec.get("workingDir")
        path = Path(wd) if wd else self.runner.workdir
        if path is None:
            return None
        with contextlib.suppress(OSError):
            path.mkdir(parents=True, exist_ok=True)
        return str(path)

    @staticmethod
    def _check_executable(argv: list[str], env: dict[str, str]) -> str | None:
        if not argv:
            return "exec: no command specified"
        exe = argv[0]
        if "/" in exe:
            if not os.path.exists(exe):
                return f'exec: "{exe}": stat {exe}: no such file or directory'
            if os.path.isdir(exe) or not os.access(exe, os.X_OK):
                return f'exec: "{exe}": permission denied'
            return None
        if shutil.which(exe, path=env.get("PATH", os.defpath)) is None:
            return f'exec: "{exe}": executable file not found in $PATH'
        return None

    # ---- status

    def _event(self, type_: str, reason: str, message: str) -> None:
        with contextlib.suppress(ApiError):
            record_event(self.store, self.pod, type_, reason, message, "kubelet")

    def _compute_phase(self) -> str:
        if self.init_failed:
            return "Failed"
        if not self.init_done:
            return "Pending"
        if self.containers and all(c.final for c in self.containers):
            return "Succeeded" if all(c.exit_code() == 0 for c in self.containers) else "Failed"
        if any(c.started or "terminated" in c.state for c in self.containers):
            return "Running"
        return "Pending"

    def _condition(self, ctype: str, ok: bool, reason: str = "", message: str = "") -> JsonDict:
        status = "True" if ok else "False"
        old = self.conditions.get(ctype)
        cond: JsonDict = {
            "type": ctype,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": old["lastTransitionTime"] if old and old["status"] == status else _now(),
        }
        if not ok and reason:
            cond["reason"] = reason
            cond["message"] = message
        elif ok and reason == "PodCompleted":
            cond["reason"] = reason
        self.conditions[ctype] = cond
        return cond

    def _write(self) -> None:
        old_phase = self.phase
        self.phase = self._compute_phase()
        terminal = self.phase in ("Succeeded", "Failed")
        unready = [c.name for c in self.containers if not c.ready]
        if terminal:
            ready_reason, ready_msg = "PodCompleted", ""
        else:
            ready_reason, ready_msg = (
                "ContainersNotReady",
                f"containers with unready status: [{' '.join(unready)}]",
            )
        init_unready = [c.name for c in self.init if not c.final]
        conditions = [
            self._condition(
                "Initialized",
                self.init_done or (terminal and not self.init_failed),
                "ContainersNotInitialized",
                f"containers with incomplete status: [{' '.join(init_unready)}]",
            ),
            self._condition("Ready", not unready and not terminal, ready_reason, ready_msg),
            self._condition("ContainersReady", not unready and not terminal, ready_reason, ready_msg),
            self._condition("PodScheduled", True),
        ]
        status = dict(self._base_status)
        status.update(
            {
                "phase": self.phase,
                "conditions": conditions,
                "hostIP": HOST_IP,
                "hostIPs": [{"ip": HOST_IP}],
                "podIP": self.pod_ip,
                "podIPs": [{"ip": self.pod_ip}],
                "startTime": self.start_time,
                "containerStatuses": [c.status() for c in self.containers],
            }
        )
        if self.init:
            status["initContainerStatuses"] = [c.status() for c in self.init]
        with contextlib.suppress(ApiError):
            self.store.update_status("pods", self.namespace, self.name, status)
        if self.phase != old_phase:
            self.runner.pod_phase_changed(self.namespace)


async def _pump(stream: asyncio.StreamReader, clog: ContainerLog) -> None:
    """Copy a process's output into its log, line by line, without a line length limit of its own."""
    pending: list[bytes] = []
    pending_len = 0
    while True:
        chunk = await stream.read(_CHUNK)
        if not chunk:
            break
        parts = chunk.split(b"\n")
        if len(parts) == 1:
            pending.append(chunk)
            pending_len += len(chunk)
            if pending_len >= _MAX_LINE:
                clog.append(b"".join(pending))
                pending, pending_len = [], 0
            continue
        head = parts[0]
        if pending:
            head = b"".join(pending) + head
            pending, pending_len = [], 0
        clog.append(head)
        for line in parts[1:-1]:
            clog.append(line)
        if parts[-1]:
            pending, pending_len = [parts[-1]], len(parts[-1])
    if pending:
        clog.append(b"".join(pending))


def _tail_message(clog: ContainerLog) -> str:
    lines = [line for _, line in clog.entries[-_FALLBACK_LINES:]]
    text = b"\n".join(lines)[-_FALLBACK_BYTES:]
    return text.decode(errors="replace")


__all__ = ["HOST_IP", "Runner", "expand", "gpu_request"]
