"""Process supervision for one pod: its containers run as local process groups (init containers first),
restarted with back-off per restartPolicy, stopped with SIGTERM then SIGKILL after the grace period (which
a repeated delete may shorten), their output pumped into PodLogs, and the pod status the kubelet reports
written back. The environment the processes get is built by podenv.py."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from pathlib import Path
from typing import Protocol

from airflow_tfjob.local.model.resources import ApiError, JsonDict, now_rfc3339
from airflow_tfjob.local.node import images, memory
from airflow_tfjob.local.node.dns import LocalDns
from airflow_tfjob.local.node.podenv import (
    HOST_IP,
    ConfigError,
    PodEnvironment,
    check_executable,
    expand,
    host_path,
)
from airflow_tfjob.local.node.podlogs import ContainerLog, PodLogs
from airflow_tfjob.local.node.watchdog import ProcessGroups
from airflow_tfjob.local.store.core import Store
from airflow_tfjob.local.store.events import record_event

log = logging.getLogger(__name__)

_CHUNK = 65536
_MAX_LINE = 16 * 1024 * 1024
_BACKOFF_BASE = 0.5
_BACKOFF_MAX = 8.0
_CONFIG_RETRY = 1.0
_PULL_RETRY = 1.0  # from ErrImagePull to ImagePullBackOff (the kubelet's next pod sync)
_PULL_BACKOFF_BASE = 1.0  # then backs off 1 s doubling to 8 s (the kubelet: 10 s doubling to 5 min)
_DRAIN_TIMEOUT = 2.0
_FALLBACK_LINES = 80
_FALLBACK_BYTES = 2048


def killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class ContainerState:
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


class Kubelet(Protocol):
    """What a `PodRun` asks of the node that runs it (runner.Runner is the one): the node's facts, its
    log buffers and process groups, and the two things a pod tells its node. Declared here so that a
    pod's supervision sits below the runner that schedules pods, instead of pointing back at it."""

    store: Store
    podlogs: PodLogs
    node_name: str
    gpus_configured: bool
    workdir: Path | None
    dns: LocalDns
    volumes_dir: Path
    setpriv: str | None
    groups: ProcessGroups

    def pod_finished(self, uid: str) -> None: ...

    def pod_phase_changed(self, namespace: str, labels: dict[str, str]) -> None: ...


class PodRun:
    """One pod on this node: its containers' processes and the status the kubelet reports."""

    def __init__(self, runner: Kubelet, pod: JsonDict, pod_ip: str, gpus: list[str]) -> None:
        self.runner = runner
        self.store = runner.store
        self.pod = pod
        meta = pod["metadata"]
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self.uid: str = meta["uid"]
        self.pod_ip = pod_ip
        self.env = PodEnvironment(
            runner.store,
            pod,
            pod_ip,
            gpus,
            node_name=runner.node_name,
            gpus_configured=runner.gpus_configured,
            workdir=runner.workdir,
            dns_dir=runner.dns.directory(self.namespace),
            volumes_dir=runner.volumes_dir,
        )
        spec = pod.get("spec") or {}
        self.restart_policy: str = spec.get("restartPolicy", "Always")
        self.init = [ContainerState(c) for c in spec.get("initContainers") or []]
        self.containers = [ContainerState(c) for c in spec.get("containers") or []]
        self.init_done = not self.init
        self.init_failed = False
        self.start_time = now_rfc3339()
        self.conditions: dict[str, JsonDict] = {}
        self.phase = "Pending"
        self.terminating = asyncio.Event()
        self.main_task: asyncio.Task[None] | None = None
        self._terminate_task: asyncio.Task[None] | None = None
        self._kill_at: float | None = None  # loop time of the SIGKILL; a repeated delete may bring it closer
        self._kill_at_changed = asyncio.Event()
        self._base_status = dict(pod.get("status") or {})
        self.lost = False  # its node was lost: nothing reports for it any more (runner.lose_node)

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

    async def _init_container(self, c: ContainerState) -> bool:
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

    async def _container_loop(self, c: ContainerState) -> None:
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

    async def _back_off(self, c: ContainerState) -> bool:
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

    async def _run_once(self, c: ContainerState) -> int | None:
        """Start the container's process and wait for it; its exit code, or None if never started
        because the pod is being deleted."""
        if not await self._pull(c):
            return None
        while True:
            if self.terminating.is_set():
                return None
            try:
                env, variables = self.env.environment(c.spec)
                break
            except ConfigError as exc:
                c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}
                self._write()
                if await self._wait_terminating(_CONFIG_RETRY):
                    return None
        mounts = self.env.claim_mounts(c.spec)
        argv = [
            host_path(expand(str(a), variables), mounts)
            for a in [*(c.spec.get("command") or []), *(c.spec.get("args") or [])]
        ]
        cwd = self.env.working_dir(c.spec)
        started = now_rfc3339()
        c.log = self.runner.podlogs.start_instance(self.namespace, self.name, c.name)
        error = check_executable(argv, env)
        proc = None
        if error is None:
            if self.runner.setpriv:
                argv = [self.runner.setpriv, "--pdeathsig", "KILL", "--", *argv]
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    # The mark lets the watchdog find this process before the group below is registered.
                    env={**env, **self.runner.groups.arm()},
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
                    "finishedAt": now_rfc3339(),
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
        limit = memory.limit_bytes(c.spec)
        oom_watch = (
            asyncio.create_task(memory.watch(proc.pid, limit, lambda: killpg(proc.pid, signal.SIGKILL)))
            if limit is not None
            else None
        )
        rc = await proc.wait()
        oom = False
        if oom_watch is not None:
            if oom_watch.done():
                oom = bool(oom_watch.result())
            else:
                oom_watch.cancel()
        # The container's init process is gone: like a PID namespace, take the rest of the group along.
        killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(pump), _DRAIN_TIMEOUT)
        pump.cancel()
        self.runner.groups.discard(proc.pid)
        c.log.close()
        c.proc = None
        code = rc if rc >= 0 else 128 - rc
        reason = "Completed" if code == 0 else "OOMKilled" if oom and code == 137 else "Error"
        term: JsonDict = {"exitCode": code, "reason": reason}
        if code != 0 and c.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            term["message"] = _tail_message(c.log)
        term.update({"startedAt": started, "finishedAt": now_rfc3339(), "containerID": c.container_id})
        c.state = {"terminated": term}
        c.ready = False
        self._write()
        return code

    async def _pull(self, c: ContainerState) -> bool:
        """The image's pull (images.py): at once for an image this node has; for one it cannot pull,
        ErrImagePull, then ImagePullBackOff while backing off, again and again. False once the pod is
        being deleted."""
        image = str(c.spec.get("image") or "")
        delay = _PULL_BACKOFF_BASE
        while True:
            error = images.pull_error(image)
            if error is None:
                return True
            self._event("Normal", "Pulling", f'Pulling image "{image}"')
            self._event("Warning", "Failed", f'Failed to pull image "{image}": {error}')
            self._event("Warning", "Failed", "Error: ErrImagePull")
            c.state = {"waiting": {"reason": "ErrImagePull", "message": error}}
            self._write()
            if await self._wait_terminating(_PULL_RETRY):
                return False
            self._event("Normal", "BackOff", f'Back-off pulling image "{image}"')
            self._event("Warning", "Failed", "Error: ImagePullBackOff")
            c.state = {"waiting": {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}}
            self._write()
            if await self._wait_terminating(delay):
                return False
            delay = min(delay * 2, _BACKOFF_MAX)

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
                killpg(c.proc.pid, sig)

    def removed(self) -> None:
        """The pod object is gone (deleted at once, or finalized): nothing of it may keep running."""
        self.stop_all(signal.SIGKILL)

    def cancel(self) -> None:
        for task in (self.main_task, self._terminate_task):
            if task is not None:
                task.cancel()

    # ---- environment

    def _event(self, type_: str, reason: str, message: str) -> None:
        if self.lost:
            return
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
            "lastTransitionTime": old["lastTransitionTime"] if old and old["status"] == status else now_rfc3339(),
        }
        if not ok and reason:
            cond["reason"] = reason
            cond["message"] = message
        elif ok and reason == "PodCompleted":
            cond["reason"] = reason
        self.conditions[ctype] = cond
        return cond

    def _write(self) -> None:
        if self.lost:  # a lost node's kubelet reports nothing, not even its containers' end
            return
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
            self.runner.pod_phase_changed(self.namespace, self.pod["metadata"].get("labels") or {})


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
