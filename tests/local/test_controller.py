"""The TFJob controller against real processes: store + controller + runner on the test's event loop.

Replica commands are tiny Python scripts. Every wait is on a condition with a timeout.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from store_reads import StoreReads
from waiting import until_async

from airflow_tfjob.local.admission.v1jobs import TFJobAdmission
from airflow_tfjob.local.controllers.v1.controller import V1JobController
from airflow_tfjob.local.controllers.v1.tfjob import TFJobController
from airflow_tfjob.local.node.podlogs import PodLogs
from airflow_tfjob.local.node.ports import ANNOTATION_HOST_PORT
from airflow_tfjob.local.node.runner import Runner
from airflow_tfjob.local.store.core import Store

NS = "default"
TIMEOUT = 30.0

EXIT = "import sys; sys.exit({code})"
SLEEP = "import time; time.sleep(3600)"


def wait_file(path: Path, then: str = "") -> str:
    return f"import os, sys, time\nwhile not os.path.exists({str(path)!r}): time.sleep(0.02)\n{then}"


def run_counter(path: Path) -> str:
    """Counts this replica's runs in `path`; the script's `n` is 1 on the first run."""
    return (
        f"import os\np = {str(path)!r}\nn = int(open(p).read()) + 1 if os.path.exists(p) else 1\n"
        "open(p, 'w').write(str(n))\n"
    )


def replica(script: str, n: int = 1, policy: str | None = None, **template: Any) -> dict[str, Any]:
    container = {"name": "tensorflow", "image": "python:3.11", "command": [sys.executable, "-c", script]}
    spec: dict[str, Any] = {"replicas": n, "template": {"spec": {"containers": [container], **template}}}
    if policy:
        spec["restartPolicy"] = policy
    return spec


def tfjob(name: str, replicas: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"tfReplicaSpecs": replicas, **spec},
    }


@dataclass
class Harness(StoreReads):
    store: Store
    podlogs: PodLogs
    tmp: Path
    history: dict[str, list[list[tuple[str, str, str]]]] = field(default_factory=dict)
    controller: V1JobController | None = None

    def reconcile_now(self, name: str) -> None:
        """One reconcile pass of the running controller, run to completion before returning (the pass is
        synchronous): a deterministic "the controller has seen the current state" point."""
        assert self.controller is not None
        self.controller.reconcile(NS, name)

    def create(self, job: dict[str, Any]) -> dict[str, Any]:
        return self.store.create("tfjobs", NS, job)

    def job(self, name: str) -> dict[str, Any]:
        return self.store.get("tfjobs", NS, name)

    def status(self, name: str) -> dict[str, Any]:
        return self.job(name).get("status") or {}

    def conditions(self, name: str) -> list[tuple[str, str, str]]:
        return [(c["type"], c["status"], c["reason"]) for c in self.status(name).get("conditions") or []]

    def has(self, name: str, ctype: str, status: str = "True") -> bool:
        return any(t == ctype and s == status for t, s, _ in self.conditions(name))

    async def until(self, predicate: Callable[[], object], timeout: float = TIMEOUT, what: str = "") -> None:
        await until_async(predicate, what, timeout)

    def touch(self, name: str) -> None:
        (self.tmp / name).write_text("")


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    store = Store(admission=TFJobAdmission())
    podlogs = PodLogs()
    controller = TFJobController(store)
    runner = Runner(store, podlogs, workdir=tmp_path)
    harness = Harness(store, podlogs, tmp_path, controller=controller)
    tasks = [asyncio.create_task(controller.run()), asyncio.create_task(runner.run())]

    async def record() -> None:
        # Every distinct conditions list each job goes through, in order (the transition sequences).
        watcher = store.watch("tfjobs")
        async for _etype, obj in watcher:
            conds = [
                (c["type"], c["status"], c["reason"])
                for c in (obj.get("status") or {}).get("conditions") or []
            ]
            seq = harness.history.setdefault(obj["metadata"]["name"], [])
            if not seq or seq[-1] != conds:
                seq.append(conds)

    tasks.append(asyncio.create_task(record()))
    try:
        yield harness
    finally:
        await runner.shutdown()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def seq(h: Harness, name: str) -> list[list[tuple[str, str, str]]]:
    return [s for s in h.history.get(name, []) if s]


async def settled_seq(h: Harness, name: str) -> list[list[tuple[str, str, str]]]:
    """The recorded transitions once the recorder has caught up with the store: the recorder reads the
    watch in its own task, so right after a condition shows in the store its event may not be read yet."""
    await h.until(lambda: bool(seq(h, name)) and seq(h, name)[-1] == h.conditions(name), what="recorder caught up")
    return seq(h, name)


CREATED = ("Created", "True", "TFJobCreated")
RUNNING = ("Running", "True", "TFJobRunning")
RUNNING_F = ("Running", "False", "TFJobRunning")
SUCCEEDED = ("Succeeded", "True", "TFJobSucceeded")
FAILED = ("Failed", "True", "TFJobFailed")
RESTARTING = ("Restarting", "True", "TFJobRestarting")


# ---------------------------------------------------------------------------------------------------
# Pods, services, labels, TF_CONFIG


async def test_pods_services_labels_owner_and_tf_config(h: Harness) -> None:
    go = h.tmp / "go"
    job = h.create(
        tfjob(
            "mix",
            {
                "chief": replica(wait_file(go)),
                "PS": replica(SLEEP, 2),
                "Worker": replica(wait_file(go), 2, restartPolicy="Never"),
                "Evaluator": replica(SLEEP),
            },
            runPolicy={"cleanPodPolicy": "All"},
        )
    )
    names = ["mix-chief-0", "mix-ps-0", "mix-ps-1", "mix-worker-0", "mix-worker-1", "mix-evaluator-0"]
    await h.until(lambda: all(h.pod(n) for n in names) and len(h.services("mix")) == 6, what="pods+services")
    ports: dict[str, int] = {}
    for name in names:
        pod = h.pod(name)
        assert pod is not None
        rt, index = name.split("-")[1], name.split("-")[2]
        labels = pod["metadata"]["labels"]
        assert labels["training.kubeflow.org/operator-name"] == "tfjob-controller"
        assert labels["training.kubeflow.org/job-name"] == "mix"
        assert labels["training.kubeflow.org/replica-type"] == rt
        assert labels["training.kubeflow.org/replica-index"] == index
        assert (labels.get("training.kubeflow.org/job-role") == "master") is (rt == "chief")
        ref = pod["metadata"]["ownerReferences"][0]
        assert ref == {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "name": "mix",
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert pod["spec"]["restartPolicy"] == "Never"
        container = pod["spec"]["containers"][0]
        assert {"name": "tfjob-port", "containerPort": 2222, "protocol": "TCP"} in container["ports"]
        ports[name] = int(pod["metadata"]["annotations"][ANNOTATION_HOST_PORT])
        svc = h.store.get("services", NS, name)
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["selector"] == {
            k: v for k, v in labels.items() if k != "training.kubeflow.org/job-role"
        }
        assert svc["spec"]["ports"][0]["port"] == 2222
        assert svc["spec"]["ports"][0]["targetPort"] == ports[name]
        assert svc["metadata"]["annotations"][ANNOTATION_HOST_PORT] == str(ports[name])
    assert len(set(ports.values())) == 6
    worker1 = h.pod("mix-worker-1")
    assert worker1 is not None
    env = {e["name"]: e.get("value") for e in worker1["spec"]["containers"][0]["env"]}
    p = ports
    assert env["TF_CONFIG"] == (
        f'{{"cluster":{{"chief":["127.0.0.1:{p["mix-chief-0"]}"],"evaluator":["127.0.0.1:{p["mix-evaluator-0"]}"],'
        f'"ps":["127.0.0.1:{p["mix-ps-0"]}","127.0.0.1:{p["mix-ps-1"]}"],'
        f'"worker":["127.0.0.1:{p["mix-worker-0"]}","127.0.0.1:{p["mix-worker-1"]}"]}},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}'
    )
    # The template's restartPolicy is overwritten, with the operator's warning.
    assert (
        "Warning",
        "SetPodTemplateRestartPolicy",
        "Restart policy in pod template will be overwritten by restart policy in replica spec",
    ) in h.events("mix")
    # The stored spec is what was submitted: defaults live in memory only.
    assert h.job("mix")["spec"] == job["spec"]
    h.touch("go")
    await h.until(lambda: h.has("mix", "Succeeded"), what="success")


async def test_single_replica_gets_no_tf_config_and_worker0_is_master(h: Harness) -> None:
    h.create(tfjob("solo", {"Worker": replica(EXIT.format(code=0))}))
    await h.until(lambda: h.has("solo", "Succeeded"))
    pod = h.pod("solo-worker-0")
    assert pod is not None
    assert "env" not in pod["spec"]["containers"][0]
    assert pod["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"


async def test_dynamic_worker_sparse_tf_config_and_template_metadata_kept(h: Harness) -> None:
    rep = replica(SLEEP, 2)
    rep["template"]["metadata"] = {"labels": {"team": "ml"}, "annotations": {"note": "x"}}
    h.create(tfjob("dyn", {"Worker": rep, "PS": replica(SLEEP)}, enableDynamicWorker=True))
    await h.until(lambda: h.pod("dyn-worker-1") and h.pod("dyn-ps-0"))
    w1, ps0 = h.pod("dyn-worker-1"), h.pod("dyn-ps-0")
    assert w1 is not None and ps0 is not None
    port = {n: p["metadata"]["annotations"][ANNOTATION_HOST_PORT] for n, p in (("dyn-worker-1", w1), ("dyn-ps-0", ps0))}
    env = w1["spec"]["containers"][0]["env"][0]
    assert env == {
        "name": "TF_CONFIG",
        "value": f'{{"cluster":{{"worker":{{"1":"127.0.0.1:{port["dyn-worker-1"]}"}},'
        f'"ps":["127.0.0.1:{port["dyn-ps-0"]}"]}},"task":{{"type":"worker","index":1}}}}',
    }
    assert w1["metadata"]["labels"]["team"] == "ml"
    assert w1["metadata"]["annotations"]["note"] == "x"


# ---------------------------------------------------------------------------------------------------
# Condition sequences (§2.3) and success rules (§2.4)


async def test_happy_path_sequence_and_replica_statuses(h: Harness) -> None:
    h.create(tfjob("happy", {"Worker": replica(wait_file(h.tmp / "go"), 2), "PS": replica(SLEEP)}))
    await h.until(lambda: h.has("happy", "Running"))
    await h.until(lambda: h.status("happy").get("replicaStatuses", {}).get("PS") == {"active": 1})
    h.touch("go")
    await h.until(lambda: h.has("happy", "Succeeded"))
    await h.until(
        lambda: h.status("happy")["replicaStatuses"] == {"PS": {"succeeded": 1}, "Worker": {"succeeded": 2}}
    )
    assert await settled_seq(h, "happy") == [[CREATED], [CREATED, RUNNING], [CREATED, RUNNING_F, SUCCEEDED]]
    status = h.status("happy")
    assert status["startTime"] and status["completionTime"]
    assert status["conditions"][2]["message"] == "TFJob default/happy successfully completed."
    assert status["conditions"][1]["message"] == "TFJob default/happy is running."
    # cleanPodPolicy None (default): the PS keeps running after success.
    ps = h.pod("happy-ps-0")
    assert ps is not None and ps["status"]["phase"] == "Running"
    events = h.events("happy")
    for reason in ("SuccessfulCreatePod", "SuccessfulCreateService", "ExitedWithCode", "TFJobSucceeded"):
        assert any(r == reason for _, r, _ in events), reason


@pytest.mark.parametrize(
    ("policy", "succeeds_early"),
    [pytest.param("", True, id="default-worker0"), pytest.param("AllWorkers", False, id="AllWorkers")],
)
async def test_success_policy(h: Harness, policy: str, succeeds_early: bool) -> None:
    # worker-0 exits 0 at once; worker-1 waits for a file.
    script = "import os, sys, time\nif os.environ['HOSTNAME'].endswith('-0'): sys.exit(0)\n" + wait_file(
        h.tmp / "go"
    )
    spec = {"successPolicy": policy} if policy else {}
    h.create(tfjob("sp", {"Worker": replica(script, 2)}, **spec))
    w0_done = lambda: (h.pod("sp-worker-0") or {}).get("status", {}).get("phase") == "Succeeded"  # noqa: E731
    await h.until(w0_done)
    await h.until(lambda: (h.pod("sp-worker-1") or {}).get("status", {}).get("phase") == "Running")
    if succeeds_early:
        await h.until(lambda: h.has("sp", "Succeeded"))
        # active workers are reported as succeeded after success (§2.5)
        await h.until(lambda: h.status("sp")["replicaStatuses"] == {"Worker": {"succeeded": 2}})
        assert (h.pod("sp-worker-1") or {})["status"]["phase"] == "Running"
    else:
        await h.until(lambda: h.has("sp", "Running"))
        assert not h.has("sp", "Succeeded")
        h.touch("go")
        await h.until(lambda: h.has("sp", "Succeeded"))
    h.touch("go")


async def test_chief_decides_success_and_master_role(h: Harness) -> None:
    h.create(
        tfjob("ch", {"Chief": replica(wait_file(h.tmp / "go")), "Worker": replica(EXIT.format(code=0), 2)})
    )
    await h.until(lambda: h.has("ch", "Running"))
    await h.until(lambda: h.status("ch").get("replicaStatuses", {}).get("Worker") == {"succeeded": 2})
    assert not h.has("ch", "Succeeded")  # workers finishing does not matter with a chief
    assert (h.pod("ch-chief-0") or {})["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert "training.kubeflow.org/job-role" not in (h.pod("ch-worker-0") or {})["metadata"]["labels"]
    h.touch("go")
    await h.until(lambda: h.has("ch", "Succeeded"))
    assert (await settled_seq(h, "ch"))[-1] == [CREATED, RUNNING_F, SUCCEEDED]


async def test_ps_only_never_runs_or_succeeds(h: Harness) -> None:
    h.create(tfjob("pso", {"PS": replica(EXIT.format(code=0), 2)}))
    await h.until(lambda: h.status("pso").get("replicaStatuses", {}).get("PS") == {"succeeded": 2})
    assert h.conditions("pso") == [CREATED]
    assert h.status("pso")["startTime"]


async def test_never_failure_sequence(h: Harness) -> None:
    script = (
        "import os, sys, time\nme = os.environ['HOSTNAME'][-1]\n"
        f"while not os.path.exists({str(h.tmp)!r} + '/go' + me): time.sleep(0.02)\n"
        "sys.exit(3 if me == '1' else 0)\n"
    )
    h.create(tfjob("nf", {"Worker": replica(script, 2), "PS": replica(SLEEP)}))
    await h.until(lambda: h.has("nf", "Running"))
    h.touch("go1")  # worker-1 fails while worker-0 still runs
    await h.until(lambda: h.has("nf", "Failed"))
    h.touch("go0")
    final = h.status("nf")["conditions"]
    assert [(c["type"], c["status"]) for c in final][:2] == [("Created", "True"), ("Running", "False")]
    failed = next(c for c in final if c["type"] == "Failed")
    assert failed["message"] == "TFJob default/nf has failed because 1 Worker replica(s) failed."
    assert h.status("nf")["completionTime"]
    # Nothing changes after Failed=True, even when the other worker then succeeds.
    snapshot = h.status("nf")["conditions"]
    await h.until(lambda: (h.pod("nf-worker-0") or {}).get("status", {}).get("phase") == "Succeeded")
    h.reconcile_now("nf")
    assert h.status("nf")["conditions"] == snapshot
    assert ("Normal", "TFJobFailed", failed["message"]) in h.events("nf")


async def test_ps_failure_fails_the_job(h: Harness) -> None:
    h.create(tfjob("psf", {"Worker": replica(SLEEP), "PS": replica(EXIT.format(code=2))}))
    await h.until(lambda: h.has("psf", "Failed"))
    failed = next(c for c in h.status("psf")["conditions"] if c["type"] == "Failed")
    assert failed["message"] == "TFJob default/psf has failed because 1 PS replica(s) failed."


# ---------------------------------------------------------------------------------------------------
# Restart policies (§5)


async def test_exit_code_retryable_restarts_then_succeeds(h: Harness) -> None:
    script = run_counter(h.tmp / "runs") + (
        "import signal, time\n"
        f"go = {str(h.tmp / 'go')!r} + str(n)\n"
        "while not os.path.exists(go): time.sleep(0.02)\n"
        "if n == 1: os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    h.create(tfjob("ec", {"Worker": replica(script, policy="ExitCode")}))
    await h.until(lambda: h.has("ec", "Running"))
    first_uid = (h.pod("ec-worker-0") or {})["metadata"]["uid"]
    h.touch("go1")
    # Restarting lasts only until the recreated pod runs: look for it in the recorded history.
    await h.until(lambda: any(RESTARTING in conds for conds in seq(h, "ec")))
    await h.until(
        lambda: (h.pod("ec-worker-0") or {"metadata": {"uid": first_uid}})["metadata"]["uid"] != first_uid
    )
    await h.until(lambda: h.has("ec", "Running"))
    new = h.pod("ec-worker-0")
    assert new is not None and new["status"]["containerStatuses"][0]["restartCount"] == 0
    h.touch("go2")
    await h.until(lambda: h.has("ec", "Succeeded"))
    assert await settled_seq(h, "ec") == [
        [CREATED],
        [CREATED, RUNNING],
        [CREATED, RESTARTING],
        [CREATED, RUNNING],
        [CREATED, RUNNING_F, SUCCEEDED],
    ]
    events = h.events("ec")
    assert ("Warning", "TFJobRestarting", "job ec is restarting because Worker replica(s) failed.") in events
    assert ("Normal", "ExitedWithCode", "Pod: default.ec-worker-0 exited with code 137") in events
    assert ("Normal", "SuccessfulDeletePod", "Deleted pod: ec-worker-0") in events


async def test_exit_code_permanent_fails_at_once(h: Harness) -> None:
    h.create(tfjob("ecp", {"Worker": replica(EXIT.format(code=1), 2, policy="ExitCode")}))
    await h.until(lambda: h.has("ecp", "Failed"))
    failed = next(c for c in h.status("ecp")["conditions"] if c["type"] == "Failed")
    assert failed["message"] == 'job "ecp" is failing because "Worker" replica(s) failed.'
    assert ("Warning", "TFJobFailed", failed["message"]) in h.events("ecp")


async def test_on_failure_restarts_in_place(h: Harness) -> None:
    script = run_counter(h.tmp / "runs") + "import sys\nsys.exit(1 if n == 1 else 0)\n"
    h.create(tfjob("of", {"Worker": replica(script, policy="OnFailure")}))
    await h.until(lambda: h.has("of", "Succeeded"))
    pod = h.pod("of-worker-0")
    assert pod is not None
    cs = pod["status"]["containerStatuses"][0]
    assert cs["restartCount"] == 1
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    assert cs["state"]["terminated"]["exitCode"] == 0
    assert pod["spec"]["restartPolicy"] == "OnFailure"
    assert (
        "Warning",
        "Error",
        "Error pod of-worker-0 container tensorflow exitCode: 1 terminated message: ",
    ) in h.events("of")
    assert not any(t == "Failed" for t, _, _ in h.conditions("of"))


async def test_always_restarts_even_after_success(h: Harness) -> None:
    h.create(tfjob("al", {"Worker": replica(EXIT.format(code=0), policy="Always")}))
    await h.until(
        lambda: (
            ((h.pod("al-worker-0") or {}).get("status", {}).get("containerStatuses") or [{}])[0].get(
                "restartCount", 0
            )
            >= 2
        )
    )
    assert not h.has("al", "Succeeded")
    assert (h.pod("al-worker-0") or {})["status"]["phase"] == "Running"


@pytest.mark.parametrize(
    ("policy", "limit"),
    [pytest.param("OnFailure", 2, id="OnFailure-restarts"), pytest.param("Never", 0, id="Never-limit-0")],
)
async def test_backoff_limit(h: Harness, policy: str, limit: int) -> None:
    h.create(
        tfjob(
            "bo",
            {"Worker": replica(EXIT.format(code=1), policy=policy), "PS": replica(SLEEP)},
            runPolicy={"backoffLimit": limit, "cleanPodPolicy": "Running"},
        )
    )
    await h.until(lambda: h.has("bo", "Failed"))
    failed = next(c for c in h.status("bo")["conditions"] if c["type"] == "Failed")
    assert failed["message"] == "Job bo has failed because it has reached the specified backoff limit"
    # v1.9.4: the Failed condition comes first, then cleanup by cleanPodPolicy (Running: the PS goes).
    await h.until(lambda: h.pod("bo-ps-0") is None)


# ---------------------------------------------------------------------------------------------------
# cleanPodPolicy, TTL, deadline (§6)


@pytest.mark.parametrize(
    ("policy", "chief_kept", "ps_kept"),
    [
        pytest.param("None", True, True, id="None"),
        pytest.param("Running", True, False, id="Running"),
        pytest.param("All", False, False, id="All"),
        pytest.param("Bogus", False, False, id="unknown-is-All"),
    ],
)
async def test_clean_pod_policy(h: Harness, policy: str, chief_kept: bool, ps_kept: bool) -> None:
    h.create(
        tfjob(
            "cp",
            {"Chief": replica(EXIT.format(code=0)), "PS": replica(SLEEP)},
            runPolicy={"cleanPodPolicy": policy},
        )
    )
    await h.until(lambda: h.has("cp", "Succeeded"))
    await h.until(
        lambda: (h.pod("cp-ps-0") is not None) is ps_kept and (h.pod("cp-chief-0") is not None) is chief_kept
    )
    services = {s["metadata"]["name"] for s in h.services("cp")}
    assert ("cp-ps-0" in services) is ps_kept
    assert ("cp-chief-0" in services) is chief_kept
    deleted = {m for _, r, m in h.events("cp") if r == "SuccessfulDeletePod"}
    assert ("Deleted pod: cp-ps-0" in deleted) is not ps_kept


async def test_ttl_deletes_the_job_and_its_pods(h: Harness) -> None:
    job = h.create(
        tfjob("ttl", {"Worker": replica(EXIT.format(code=0))}, runPolicy={"ttlSecondsAfterFinished": 1})
    )
    await h.until(lambda: h.has("ttl", "Succeeded"))
    await h.until(lambda: not h.store.list("tfjobs", NS, field_selector="metadata.name=ttl")[0], what="TTL")
    await h.until(lambda: not h.pods("ttl") and not h.services("ttl"), what="GC")
    items, _ = h.store.list("events", NS, field_selector=f"involvedObject.uid={job['metadata']['uid']}")
    assert ("SuccessfulDeleteJob", "Deleted job: ttl") in [(e["reason"], e["message"]) for e in items]


@pytest.mark.parametrize(("clean", "pods_left"), [("Running", False), ("None", True)])
async def test_active_deadline(h: Harness, clean: str, pods_left: bool) -> None:
    h.create(
        tfjob(
            "dl", {"Worker": replica(SLEEP)}, runPolicy={"activeDeadlineSeconds": 2, "cleanPodPolicy": clean}
        )
    )
    await h.until(lambda: h.has("dl", "Running"))
    # No pod or job event happens after Running: only the controller's own timer can end the job.
    await h.until(lambda: h.has("dl", "Failed"), timeout=10)
    failed = next(c for c in h.status("dl")["conditions"] if c["type"] == "Failed")
    assert failed["message"] == "Job dl has failed because it was active longer than specified deadline"
    if pods_left:
        h.reconcile_now("dl")  # the pass after the failure: a finished job's cleanup
        pod = h.pod("dl-worker-0")
        assert pod is not None and not pod["metadata"].get("deletionTimestamp")
        assert not any(r == "SuccessfulDeletePod" for _, r, _ in h.events("dl"))
    else:
        await h.until(lambda: h.pod("dl-worker-0") is None and not h.services("dl"))


# ---------------------------------------------------------------------------------------------------
# suspend / resume, managedBy, failed creation


async def test_suspend_and_resume(h: Harness) -> None:
    h.create(tfjob("su", {"Worker": replica(SLEEP, 2)}, runPolicy={"suspend": True}))
    await h.until(lambda: h.has("su", "Suspended"))
    assert h.conditions("su") == [CREATED, ("Suspended", "True", "TFJobSuspended")]
    assert not h.pods("su") and "startTime" not in h.status("su")
    h.store.patch("tfjobs", NS, "su", {"spec": {"runPolicy": {"suspend": False}}}, "merge")
    await h.until(lambda: h.has("su", "Running"))
    assert h.conditions("su") == [CREATED, ("Suspended", "False", "TFJobResumed"), RUNNING]
    start = h.status("su")["startTime"]
    assert start
    h.store.patch("tfjobs", NS, "su", {"spec": {"runPolicy": {"suspend": True}}}, "merge")
    await h.until(lambda: h.has("su", "Suspended"))
    assert h.conditions("su") == [
        CREATED,
        ("Running", "False", "TFJobSuspended"),
        ("Suspended", "True", "TFJobSuspended"),
    ]
    await h.until(lambda: not h.pods("su") and not h.services("su"))
    assert h.status("su")["replicaStatuses"] == {"Worker": {}}
    reasons = [r for _, r, _ in h.events("su")]
    assert "TFJobSuspended" in reasons and "TFJobResumed" in reasons


async def test_managed_by_other_controller_is_skipped(h: Harness) -> None:
    h.create(tfjob("mk", {"Worker": replica(SLEEP)}, runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"}))
    h.create(tfjob("ctl", {"Worker": replica(EXIT.format(code=0))}))
    await h.until(lambda: h.has("ctl", "Succeeded"))  # the controller is alive and has seen both
    assert "status" not in h.job("mk") or not h.job("mk")["status"]
    assert not h.pods("mk")


async def test_service_name_too_long_leaves_job_stuck(h: Harness) -> None:
    name = "a" * 55  # a-...-evaluator-0 > 63 characters
    h.create(tfjob(name, {"Worker": replica(SLEEP), "Evaluator": replica(SLEEP)}))
    await h.until(lambda: any(r == "FailedCreateService" for _, r, _ in h.events(name)))
    warn = next(m for t, r, m in h.events(name) if r == "FailedCreateService")
    assert warn.startswith(f'Error creating: Service "{name}-evaluator-0" is invalid: ')
    assert "must be no more than 63 characters" in warn
    # Pod names may be 253 characters long: the pod exists, only its Service cannot.
    await h.until(lambda: h.pod(f"{name}-evaluator-0") is not None)
    assert not h.status(name)  # no condition, no startTime: stuck, as kubeflow/trainer#1101


def _bad_restart_policy(rep: dict[str, Any]) -> None:
    rep["restartPolicy"] = "Sometimes"


def _bad_sidecar_name(rep: dict[str, Any]) -> None:
    rep["template"]["spec"]["containers"].append({"name": "Side_Car", "image": "busybox"})


@pytest.mark.parametrize(
    ("mutate", "detail"),
    [
        (_bad_restart_policy,
         'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'),
        (_bad_sidecar_name, 'spec.containers[1].name: Invalid value: "Side_Car": a lowercase RFC 1123 label'),
    ],
)
async def test_refused_pod_creation_is_a_failed_create_pod_warning(
    h: Harness, mutate: Callable[[dict[str, Any]], None], detail: str
) -> None:
    # The webhook does not check these (section 1.3): the job is stored, the API server refuses its pods.
    rep = replica(SLEEP)
    mutate(rep)
    h.create(tfjob("refused", {"Worker": rep}))

    def warnings() -> list[dict[str, Any]]:
        items, _ = h.store.list("events", NS, field_selector="involvedObject.name=refused,reason=FailedCreatePod")
        return items

    # Retried with back-off (0.5 s, then 1 s): the same warning is aggregated into one Event's count.
    await h.until(lambda: bool(warnings()) and warnings()[0].get("count", 1) >= 2, what="repeated FailedCreatePod")
    (event,) = warnings()
    assert event["type"] == "Warning" and event["source"]["component"] == "tfjob-controller"
    assert event["message"].startswith(f'Error creating: Pod "refused-worker-0" is invalid: {detail}')
    assert h.pods("refused") == [] and h.services("refused") == []
    assert not any(r == "SuccessfulCreatePod" for _, r, _ in h.events("refused"))
    assert not h.status("refused")  # the reconcile stops at the error, before any status write


async def test_unschedulable_pod_warning_on_job(tmp_path: Path) -> None:
    store = Store(admission=TFJobAdmission())
    podlogs = PodLogs()
    runner = Runner(store, podlogs, gpus=["0"], workdir=tmp_path)
    tasks = [asyncio.create_task(TFJobController(store).run()), asyncio.create_task(runner.run())]
    try:
        rep = replica(SLEEP)
        rep["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 2}}
        store.create("tfjobs", NS, tfjob("gpu", {"Worker": rep}))
        h = Harness(store, podlogs, tmp_path)
        msg = "Error pod gpu-worker-0 condition message: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
        await h.until(lambda: ("Warning", "Unschedulable", msg) in h.events("gpu"))
        assert h.conditions("gpu") == [CREATED]
    finally:
        await runner.shutdown()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def test_status_json_round_trip_is_plain_json() -> None:
    # Guard for the status shape we write: JSON types only (the API server encodes it as is).
    from airflow_tfjob.local.controllers.v1.status import set_condition

    status: dict[str, Any] = {}
    set_condition(status, "Created", "True", "TFJobCreated", "m")
    set_condition(status, "Running", "True", "TFJobRunning", "r")
    set_condition(status, "Restarting", "True", "TFJobRestarting", "x")
    assert [c["type"] for c in status["conditions"]] == ["Created", "Restarting"]
    set_condition(status, "Running", "True", "TFJobRunning", "r")
    set_condition(status, "Running", "True", "TFJobRunning", "again")  # same status+reason: no-op
    assert status["conditions"][-1]["message"] == "r"
    set_condition(status, "Failed", "True", "TFJobFailed", "f")
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("Created", "True"),
        ("Running", "False"),
        ("Failed", "True"),
    ]
    frozen = json.dumps(status)
    set_condition(status, "Succeeded", "True", "TFJobSucceeded", "s")
    assert json.dumps(status) == frozen
