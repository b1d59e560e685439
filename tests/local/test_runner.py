"""The runner (kubelet + scheduler) with real processes: store + runner on the test's event loop."""

from __future__ import annotations

import asyncio
import base64
import functools
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from process_support import alive
from waiting import until_async

from airflow_tfjob.local.model.resources import ApiError
from airflow_tfjob.local.node.podlogs import PodLogs
from airflow_tfjob.local.node.runner import Runner
from airflow_tfjob.local.store.core import Store

NS = "default"


class Node:
    def __init__(self, store: Store, podlogs: PodLogs, runner: Runner, tmp: Path) -> None:
        self.store, self.podlogs, self.runner, self.tmp = store, podlogs, runner, tmp

    def create_pod(self, name: str, script: str | None = None, **container: Any) -> dict[str, Any]:
        restart = container.pop("restart", "Never")
        grace = container.pop("grace", None)
        c: dict[str, Any] = {"name": "main", "image": "python:3.11"}
        if script is not None:
            c["command"] = [sys.executable, "-c", script]
        c.update(container)
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": name}},
        }
        pod["spec"] = {"containers": [c], "restartPolicy": restart}
        if grace is not None:
            pod["spec"]["terminationGracePeriodSeconds"] = grace
        return self.store.create("pods", NS, pod)

    def pod(self, name: str) -> dict[str, Any] | None:
        try:
            return self.store.get("pods", NS, name)
        except ApiError:
            return None

    def phase(self, name: str) -> str | None:
        pod = self.pod(name)
        return None if pod is None else pod.get("status", {}).get("phase")

    def lines(self, name: str, container: str = "main") -> list[bytes]:
        log = self.podlogs.current(NS, name, container)
        return [] if log is None else [line for _, line in log.entries]

    def events(self, name: str) -> list[tuple[str, str, str]]:
        items, _ = self.store.list("events", NS, field_selector=f"involvedObject.name={name}")
        return [(e["type"], e["reason"], e["message"]) for e in items]

    async def until(self, predicate: Callable[[], object], timeout: float = 20.0) -> None:
        await until_async(predicate, timeout=timeout)


async def _start(tmp: Path, gpus: list[str] | None = None) -> tuple[Node, asyncio.Task[None]]:
    store, podlogs = Store(), PodLogs()
    runner = Runner(store, podlogs, gpus=gpus, workdir=tmp)
    return Node(store, podlogs, runner, tmp), asyncio.create_task(runner.run())


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    n, task = await _start(tmp_path)
    try:
        yield n
    finally:
        await n.runner.shutdown()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_plain_pod_runs_and_its_output_is_captured(node: Node) -> None:
    script = (
        "import sys\n"
        "print('first')\n"
        "sys.stderr.write('to stderr\\n'); sys.stderr.flush()\n"
        "sys.stdout.write('x' * 1_000_000 + '\\n')\n"
        "sys.stdout.flush()\n"
        "sys.stdout.buffer.write(b'bad \\xff\\xfe bytes\\n')\n"
        "sys.stdout.write('no newline at the end')\n"
    )
    node.create_pod("plain", script)
    await node.until(lambda: node.phase("plain") == "Succeeded")
    log = node.podlogs.current(NS, "plain", "main")
    assert log is not None
    await node.until(lambda: log.closed)
    assert node.lines("plain") == [
        b"first",
        b"to stderr",
        b"x" * 1_000_000,
        b"bad \xff\xfe bytes",
        b"no newline at the end",
    ]
    pod = node.pod("plain")
    assert pod is not None
    status = pod["status"]
    assert pod["spec"]["nodeName"] == "local"
    assert status["podIP"].startswith("127.0.") and status["podIP"] != "127.0.0.1"
    assert status["hostIP"] == "127.0.0.1"
    cs = status["containerStatuses"][0]
    assert cs["state"]["terminated"]["exitCode"] == 0
    assert cs["state"]["terminated"]["reason"] == "Completed"
    assert cs["restartCount"] == 0
    conds = {c["type"]: (c["status"], c.get("reason")) for c in status["conditions"]}
    assert conds["PodScheduled"] == ("True", None)
    assert conds["Ready"] == ("False", "PodCompleted")
    reasons = [r for _, r, _ in node.events("plain")]
    assert {"Scheduled", "Created", "Started"} <= set(reasons)


async def test_bare_python_is_the_interpreter_running_the_cluster(node: Node) -> None:
    # Commands are written for an image ("python train.py"); locally they must find the cluster's packages.
    node.create_pod("bare-python", command=["python", "-c", "import sys; print(sys.executable)"])
    await node.until(lambda: node.phase("bare-python") == "Succeeded")
    log = node.podlogs.current(NS, "bare-python", "main")
    assert log is not None
    await node.until(lambda: log.closed)
    (printed,) = node.lines("bare-python")
    assert os.path.dirname(printed.decode()) == os.path.dirname(sys.executable)


async def test_environment_working_dir_and_expansion(node: Node) -> None:
    node.store.create(
        "secrets", NS, {"metadata": {"name": "s"}, "data": {"pw": base64.b64encode(b"hunter2").decode()}}
    )
    node.store.create("configmaps", NS, {"metadata": {"name": "cm"}, "data": {"lr": "0.1", "bs": "32"}})
    wd = node.tmp / "deep" / "dir"
    script = (
        "import os\n"
        "for k in ['PW', 'LR', 'CFG_bs', 'POD', 'NS', 'IP', 'GREETING', 'PYTHONUNBUFFERED', 'HOSTNAME']:\n"
        "    print(k + '=' + os.environ.get(k, '<unset>'))\n"
        "print('cwd=' + os.getcwd())\n"
    )
    node.create_pod(
        "envpod",
        command=[],
        args=[sys.executable, "-c", script, "$(GREETING)", "$$(GREETING)"],
        workingDir=str(wd),
        envFrom=[{"configMapRef": {"name": "cm"}, "prefix": "CFG_"}],
        env=[
            {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "s", "key": "pw"}}},
            {"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "lr"}}},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "GREETING", "value": "hello-$(POD)"},
        ],
    )
    await node.until(lambda: node.phase("envpod") == "Succeeded")
    pod = node.pod("envpod")
    assert pod is not None
    out = dict(line.decode().split("=", 1) for line in node.lines("envpod"))
    assert out == {
        "PW": "hunter2",
        "LR": "0.1",
        "CFG_bs": "32",
        "POD": "envpod",
        "NS": "default",
        "IP": pod["status"]["podIP"],
        "GREETING": "hello-envpod",
        "PYTHONUNBUFFERED": "1",
        "HOSTNAME": "envpod",
        "cwd": str(wd),
    }


async def test_missing_secret_waits_then_runs(node: Node) -> None:
    node.create_pod(
        "needs",
        "print('ok')",
        env=[{"name": "X", "valueFrom": {"secretKeyRef": {"name": "later", "key": "k"}}}],
    )

    def waiting() -> dict[str, Any]:
        statuses = (node.pod("needs") or {}).get("status", {}).get("containerStatuses") or [{}]
        return dict(statuses[0].get("state", {}).get("waiting", {}))

    await node.until(lambda: waiting().get("reason") == "CreateContainerConfigError")
    assert waiting()["message"] == 'secret "later" not found'
    node.store.create("secrets", NS, {"metadata": {"name": "later"}, "stringData": {"k": "v"}})
    await node.until(lambda: node.phase("needs") == "Succeeded")


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["no-such-program-xyz"], id="not-in-path"),
        pytest.param(["/nonexistent/prog"], id="bad-path"),
    ],
)
async def test_command_that_cannot_start(node: Node, command: list[str]) -> None:
    node.create_pod("broken", command=command)
    await node.until(lambda: node.phase("broken") == "Failed")
    term = (node.pod("broken") or {})["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 128
    assert term["reason"] == "StartError"
    assert command[0] in term["message"]


async def test_exit_codes_and_fallback_message(node: Node) -> None:
    node.create_pod(
        "fails",
        "print('boom line'); import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
        terminationMessagePolicy="FallbackToLogsOnError",
    )
    await node.until(lambda: node.phase("fails") == "Failed")
    term = (node.pod("fails") or {})["status"]["containerStatuses"][0]["state"]["terminated"]
    # Killed by SIGKILL: 137 and reason Error (not OOMKilled: it has no memory limit).
    assert (term["exitCode"], term["reason"], term["message"]) == (137, "Error", "boom line")


async def test_on_failure_restarts_with_back_off_and_previous_log(node: Node) -> None:
    counter = node.tmp / "n"
    script = (
        f"import os, sys\np = {str(counter)!r}\nn = int(open(p).read()) + 1 if os.path.exists(p) else 1\n"
        "open(p, 'w').write(str(n))\nprint('run', n)\nsys.exit(0 if n == 3 else 2)\n"
    )
    node.create_pod("crash", script, restart="OnFailure")
    seen: set[str] = set()

    def watch() -> bool:
        pod = node.pod("crash") or {}
        st = pod.get("status", {})
        cs = (st.get("containerStatuses") or [{}])[0]
        seen.update(cs.get("state", {}).keys())
        seen.update(w.get("reason", "") for w in [cs.get("state", {}).get("waiting") or {}])
        if st.get("phase") == "Running":
            seen.add("phase-running")
        return st.get("phase") == "Succeeded"

    await node.until(watch)
    cs = (node.pod("crash") or {})["status"]["containerStatuses"][0]
    assert cs["restartCount"] == 2
    assert cs["lastState"]["terminated"]["exitCode"] == 2
    assert "CrashLoopBackOff" in seen and "phase-running" in seen
    assert node.lines("crash") == [b"run 3"]
    previous = node.podlogs.previous(NS, "crash", "main")
    assert previous is not None and [line for _, line in previous.entries] == [b"run 2"]
    assert any(r == "BackOff" for _, r, _ in node.events("crash"))


async def test_graceful_deletion_sigterm_then_sigkill_of_the_whole_group(node: Node) -> None:
    pids = node.tmp / "pids"
    script = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: print('got SIGTERM', flush=True))\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "print('ready', flush=True)\n"
        "while True: time.sleep(0.05)\n"
    )
    node.create_pod("stubborn", script, grace=1)
    await node.until(lambda: b"ready" in node.lines("stubborn"))
    main_pid, child_pid = (int(x) for x in pids.read_text().split())
    node.store.delete("pods", NS, "stubborn")
    deleting = node.pod("stubborn")
    assert deleting is not None and deleting["metadata"]["deletionTimestamp"]
    await node.until(lambda: node.pod("stubborn") is None, timeout=10)
    assert node.podlogs.current(NS, "stubborn", "main") is None  # forgotten with the pod
    for pid in (main_pid, child_pid):
        await node.until(functools.partial(_gone, pid), timeout=5)


async def test_a_repeated_delete_shortens_the_grace_period(node: Node) -> None:
    """As the API server: a kill's explicit deletion with a short grace period overrides the 30 s that
    garbage collection gave the pod a moment earlier; it never lengthens it."""
    script = (
        "import os, signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print(os.getpid(), flush=True)\n"
        "time.sleep(3600)\n"
    )
    for name, shorter in (("shortened", 1), ("forced", 0)):
        node.create_pod(name, script, grace=30)
        await node.until(lambda n=name: bool(node.lines(n)))
        pid = int(node.lines(name)[0])
        node.store.delete("pods", NS, name)  # 30 s: SIGTERM, which the process ignores
        node.store.delete("pods", NS, name, grace_period_seconds=60)  # longer: changes nothing
        pod = node.pod(name)
        assert pod is not None and pod["metadata"]["deletionGracePeriodSeconds"] == 30
        node.store.delete("pods", NS, name, grace_period_seconds=shorter)
        await node.until(lambda n=name: node.pod(n) is None, timeout=10)
        await node.until(functools.partial(_gone, pid), timeout=10)


async def test_sigterm_ends_a_cooperative_process_at_once(node: Node) -> None:
    node.create_pod(
        "polite", "import time\nprint('up', flush=True)\ntime.sleep(3600)", terminationGracePeriodSeconds=30
    )
    await node.until(lambda: b"up" in node.lines("polite"))
    node.store.delete("pods", NS, "polite")
    # Gone well within the 30 s grace (the bound of the wait): SIGTERM did it, not the SIGKILL after it.
    await node.until(lambda: node.pod("polite") is None, timeout=10)


async def test_gpu_scheduling(tmp_path: Path) -> None:
    node, task = await _start(tmp_path, gpus=["0", "1"])
    try:
        go = tmp_path / "go"
        script = f"import os, time\nprint(os.environ['CUDA_VISIBLE_DEVICES'], flush=True)\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
        gpu = {"limits": {"nvidia.com/gpu": 2}}
        node.create_pod("big", script, resources=gpu)
        await node.until(lambda: node.lines("big") == [b"0,1"])
        node.create_pod("next", script, resources={"limits": {"nvidia.com/gpu": "1"}})
        node.create_pod("cpu", "import os; print(repr(os.environ['CUDA_VISIBLE_DEVICES']))")
        await node.until(lambda: node.phase("cpu") == "Succeeded")
        assert node.lines("cpu") == [b"''"]
        await node.until(lambda: any(r == "FailedScheduling" for _, r, _ in node.events("next")))
        pending = node.pod("next")
        assert pending is not None and pending["status"]["phase"] == "Pending"
        assert "nodeName" not in pending["spec"]
        msg = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
        assert pending["status"]["conditions"][0] == {
            **pending["status"]["conditions"][0],
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": msg,
        }
        assert ("Warning", "FailedScheduling", msg) in node.events("next")
        go.write_text("")
        await node.until(lambda: node.lines("next") in ([b"0"], [b"1"]))
    finally:
        await node.runner.shutdown()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_load_balancer_service_gets_the_pod_ip(node: Node) -> None:
    node.store.create(
        "services",
        NS,
        {
            "metadata": {"name": "tb"},
            "spec": {"type": "LoadBalancer", "selector": {"app": "tb"}, "ports": [{"port": 6006}]},
        },
    )
    node.create_pod("tb", "import time\nprint('serving', flush=True)\ntime.sleep(3600)")
    await node.until(lambda: b"serving" in node.lines("tb"))
    ip = (node.pod("tb") or {})["status"]["podIP"]
    await node.until(
        lambda: node.store.get("services", NS, "tb")["status"]["loadBalancer"] == {"ingress": [{"ip": ip}]}
    )
    node.store.delete("pods", NS, "tb", grace_period_seconds=0)
    await node.until(lambda: node.store.get("services", NS, "tb")["status"]["loadBalancer"] == {})


async def test_shutdown_kills_every_process_group(tmp_path: Path) -> None:
    node, task = await _start(tmp_path)
    pidfile = tmp_path / "pid"
    node.create_pod(
        "forever",
        "import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(3600)",
    )
    await node.until(lambda: pidfile.exists() and pidfile.read_text())
    pid = int(pidfile.read_text())
    await node.runner.shutdown()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await node.until(lambda: not alive(pid), timeout=5)


def _gone(pid: int) -> bool:
    return not alive(pid)


def test_alive_helper_sees_this_process() -> None:
    assert alive(os.getpid())
    assert signal.SIGKILL  # the module's signal import is used by the scripts above


# ---------------------------------------------------------------- the failures a real node reports


async def test_a_container_past_its_memory_limit_is_oom_killed(node: Node) -> None:
    """Reason OOMKilled and exit code 137, as the kernel's memory cgroup and the kubelet report it; a
    container under its limit runs as before."""
    grow = "import time\ndata = b'x' * (200 << 20)\nprint('allocated', flush=True)\ntime.sleep(30)\n"
    node.create_pod("hungry", grow, resources={"limits": {"memory": "100Mi"}})
    node.create_pod("fits", grow.replace("time.sleep(30)", "pass"), resources={"limits": {"memory": "400Mi"}})
    await node.until(lambda: node.phase("hungry") == "Failed" and node.phase("fits") == "Succeeded", timeout=30)
    term = (node.pod("hungry") or {})["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (137, "OOMKilled")


async def test_an_image_that_cannot_be_pulled_backs_off_as_the_kubelet_does(node: Node) -> None:
    node.create_pod("unpullable", "print('never runs')", image="registry.invalid/team/trainer:1.0")
    seen: list[str] = []

    def waiting() -> bool:
        cs = ((node.pod("unpullable") or {}).get("status", {}).get("containerStatuses") or [{}])[0]
        reason = (cs.get("state", {}).get("waiting") or {}).get("reason")
        if reason and (not seen or seen[-1] != reason):
            seen.append(reason)
        return seen[-3:] == ["ErrImagePull", "ImagePullBackOff", "ErrImagePull"]

    await node.until(waiting, timeout=20)
    assert node.phase("unpullable") == "Pending"
    assert node.lines("unpullable") == []
    cs = (node.pod("unpullable") or {})["status"]["containerStatuses"][0]
    assert cs["state"]["waiting"]["message"].endswith("dial tcp: lookup registry.invalid: no such host")
    events = node.events("unpullable")
    assert ("Normal", "Pulling", 'Pulling image "registry.invalid/team/trainer:1.0"') in events
    assert ("Warning", "Failed", "Error: ErrImagePull") in events
    assert ("Normal", "BackOff", 'Back-off pulling image "registry.invalid/team/trainer:1.0"') in events
    assert ("Warning", "Failed", "Error: ImagePullBackOff") in events


async def test_a_lost_node_s_pods_are_marked_evicted_and_removed_as_the_controllers_do(node: Node) -> None:
    pids = node.tmp / "lost.pid"
    script = f"import os, time\nopen({str(pids)!r}, 'w').write(str(os.getpid()))\nprint('up', flush=True)\ntime.sleep(3600)\n"
    node.create_pod("doomed", script)
    node.create_pod("spared", "import time\nprint('up', flush=True)\ntime.sleep(3600)\n")
    await node.until(lambda: b"up" in node.lines("doomed") and b"up" in node.lines("spared"))
    seen: list[dict[str, Any]] = []
    lost = asyncio.create_task(node.runner.lose_node("app=doomed", step=0.3))

    def gone() -> bool:
        pod = node.pod("doomed")
        if pod is not None:
            seen.append(pod)
        return pod is None

    await node.until(gone, timeout=10)
    assert await lost == ["default/doomed"]
    await node.until(functools.partial(_gone, int(pids.read_text())), timeout=5)
    terminating = [p for p in seen if p["metadata"].get("deletionTimestamp")]
    assert terminating, "the pod stayed Terminating while no kubelet confirmed its deletion"
    assert terminating[0]["status"]["phase"] == "Running"
    conditions = {c["type"]: c for c in terminating[0]["status"]["conditions"]}
    assert conditions["Ready"]["status"] == "False"
    assert (conditions["DisruptionTarget"]["status"], conditions["DisruptionTarget"]["reason"]) == (
        "True",
        "DeletionByTaintManager",
    )
    events = [(t, r) for t, r, _ in node.events("doomed")]
    assert ("Warning", "NodeNotReady") in events and ("Normal", "TaintManagerEviction") in events
    assert node.phase("spared") == "Running"
