"""Chaos: the operator (both modes) and the sensor against a local cluster that throttles, fails, loses
replies and cuts streams. Each test asserts the task's outcome, exactly one TFJob for the task
instance, every replica line in the task log exactly once, and nothing left behind.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_support import (
    StateStore,
    TaskInstance,
    defer,
    fire,
    first_event,
    rebuild_trigger,
    wait_for,
)

from airflow_tfjob.build.naming import identity_selector
from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook
from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.faults import DEFAULT_KINDS, KINDS, STREAM_ONLY, FaultPlan
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.sensors.tfjob import TFJobSensor
from airflow_tfjob.version_compat import AirflowException

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

LINES = 40
# Each replica prints LINES numbered lines over about two seconds (long enough for cut streams to
# resume mid-way), then its metric.
PROGRAM = r"""
import json, os, time
task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {})
me = f"{task.get('type', 'worker')}-{task.get('index', 0)}"
lines, gate = int(os.environ["LINES"]), os.environ.get("GATE")
for i in range(lines):
    if gate and i == lines // 2:
        while not os.path.exists(gate):  # the test opens the gate when it has done its part
            time.sleep(0.05)
    print(f"chaos {os.environ.get('TAG', '')}{me} line {i}", flush=True)
    time.sleep(float(os.environ.get("PAUSE", "0.05")))
print("accuracy=0.9", flush=True)
"""
# A record of several lines is printed as one: only the first carries the logger's suffix.
LINE = re.compile(r"\[(worker-\d)\] chaos ([a-z]*)(worker-\d) line (\d+)(?!\d)")
FAULT_SETS: dict[str, tuple[str, ...]] = {kind: (kind,) for kind in KINDS} | {"all": DEFAULT_KINDS}


def plan(name: str, rate: float = 0.3, **kwargs: Any) -> FaultPlan:
    return FaultPlan(
        seed=zlib.crc32(name.encode()),
        rate=rate,
        kinds=FAULT_SETS[name],
        stream_cut_after=(0.3, 1.2),
        **kwargs,
    )


@pytest.fixture(scope="module")
def chaos_cluster() -> Iterator[LocalCluster]:
    with LocalCluster() as cluster:
        yield cluster


def use_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **extra: Any) -> None:
    """The Kubernetes connection `conn_id` with these extras (namespace "default" unless given)."""
    extra = {"namespace": "default", **extra}
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kubernetes", "extra": extra})
    )


def use_cluster(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch, conn_id: str) -> None:
    use_connection(monkeypatch, conn_id, kube_config_path=str(cluster.kubeconfig_path))


@pytest.fixture
def chaos(chaos_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalCluster]:
    use_cluster(chaos_cluster, monkeypatch, "chaos")
    yield chaos_cluster
    chaos_cluster.set_faults(None)


def make_operator(conn_id: str = "chaos", **kwargs: Any) -> TFJobOperator:
    params: dict[str, Any] = {
        "task_id": "train",
        "kubernetes_conn_id": conn_id,
        "namespace": "default",
        "image": "local/python",
        "command": [sys.executable, "-c", PROGRAM],
        "env": {"LINES": str(LINES)},
        "worker": 2,
        "log_replicas": "all",
        "metrics": ["accuracy"],
        "clean_pod_policy": "All",
        "startup_timeout": 120,
        "api_retry_timeout": 60,
    }
    params.update(kwargs)
    return TFJobOperator(**params)


def context_with_store(ti: TaskInstance, store: StateStore | None = None) -> dict[str, Any]:
    return {"ti": ti, "task_instance": ti, "run_id": ti.run_id, "task_state_store": store or StateStore()}


def run_task(op: TFJobOperator, context: dict[str, Any]) -> Any:
    if not op.deferrable:
        return op.execute(context)
    event = fire(defer(op, context["ti"], context))
    return op.execute_complete(context, event)


def assert_every_line_once(
    logged: str, tag: str = "", replicas: tuple[str, ...] = ("worker-0", "worker-1")
) -> None:
    """Each replica's numbered lines (of the job whose program got TAG=tag) are in the log exactly once."""
    seen: Counter[tuple[str, int]] = Counter()
    for line in logged.splitlines():
        match = LINE.search(line)
        if match and match.group(2) == tag and match.group(1) == match.group(3):
            seen[(match.group(1), int(match.group(4)))] += 1
    expected = {(replica, i) for replica in replicas for i in range(LINES)}
    missing = sorted(expected - set(seen))
    repeated = sorted(key for key, count in seen.items() if count > 1)
    assert not missing, f"lines lost: {missing[:10]} ({len(missing)} in all)"
    assert not repeated, f"lines repeated: {repeated[:10]} ({len(repeated)} in all)"


def the_jobs(hook: KubeflowJobHook, ti: TaskInstance) -> list[dict[str, Any]]:
    selector = identity_selector(ti.dag_id, ti.task_id, ti.run_id, ti.map_index, include_handled=True)
    return hook.list_jobs("TFJob", "default", selector)


def assert_one_job_and_nothing_left(hook: KubeflowJobHook, ti: TaskInstance) -> None:
    jobs = the_jobs(hook, ti)
    assert len(jobs) == 1, [j["metadata"]["name"] for j in jobs]
    name = jobs[0]["metadata"]["name"]
    # cleanPodPolicy All, applied by the task after the logs: no pod, no Service, no process.
    wait_for(lambda: not hook.list_job_pods(name, "default"), 60, f"the pods of {name} to go")
    services = hook.core_v1_client.list_namespaced_service("default").items
    assert not [s.metadata.name for s in services if s.metadata.name.startswith(f"{name}-")]
    hook.delete_job("TFJob", name, "default")


@pytest.mark.parametrize("mode", ["sync", "deferred"])
@pytest.mark.parametrize("faults", list(FAULT_SETS))
def test_the_task_keeps_its_jobs_outcome_under_faults(
    chaos: LocalCluster, mode: str, faults: str, capfd: pytest.CaptureFixture[str]
) -> None:
    ti = TaskInstance()
    op = make_operator(deferrable=mode == "deferred")
    before = chaos.fault_counts()
    # A task opens few streams: a kind for streams only ("unterminated", "stream_end") ends every one
    # of them, as the gateways and servers that do it do; at 0.3 a run could draw none.
    chaos.set_faults(plan(faults, rate=1.0 if set(FAULT_SETS[faults]) <= STREAM_ONLY else 0.3))
    result = run_task(op, context_with_store(ti))
    chaos.set_faults(None)
    injected = {k: v - before.get(k, 0) for k, v in chaos.fault_counts().items()}
    assert sum(injected.values()) > 0, "no fault was injected: the test would prove nothing"
    assert result["state"] == "succeeded"
    assert result["metrics"]["accuracy"] == 0.9 and not result["metrics"].get("missing")
    logged = "".join(capfd.readouterr())
    assert_every_line_once(logged)
    assert_one_job_and_nothing_left(KubeflowJobHook(conn_id="chaos"), ti)


@pytest.mark.parametrize("retries", [0, 1])
@pytest.mark.parametrize("mode", ["sync", "deferred"])
def test_a_lost_create_reply_is_adopted_not_repeated(chaos: LocalCluster, mode: str, retries: int) -> None:
    """Every create is applied and its reply lost: the try reads the job back and follows it, whether or
    not the task has retries left (before, the try failed and, without retries, the job ran on alone)."""
    ti = TaskInstance()
    op = make_operator(deferrable=mode == "deferred", retries=retries, worker=1)
    chaos.set_faults(FaultPlan(seed=1, rate=1.0, kinds=("lost_reply",), verbs=("POST",)))
    result = run_task(op, context_with_store(ti))
    chaos.set_faults(None)
    assert result["state"] == "succeeded"
    assert_one_job_and_nothing_left(KubeflowJobHook(conn_id="chaos"), ti)


def test_the_next_try_finds_a_job_whose_create_never_answered(chaos: LocalCluster) -> None:
    """The submission is recorded in the task_state_store before the create is sent, so a try that dies
    while its create is unanswered leaves the next try a way to find the job (by its submission id)."""
    from airflow_tfjob.build.manifest import submission_manifest
    from airflow_tfjob.operators.submit import with_submission_id

    ti, store = TaskInstance(), StateStore()
    first = make_operator(worker=1, api_retry_timeout=1)
    chaos.set_faults(FaultPlan(seed=3, rate=1.0, kinds=("unavailable",), verbs=("POST",)))
    with pytest.raises(Exception, match="api_retry_timeout"):
        first.execute(context_with_store(ti, store))
    chaos.set_faults(None)
    recorded = store.get("tfjob")
    assert recorded["submission"] and recorded["uid"] is None
    # What a create that reached the server and never answered leaves behind: that submission's job.
    body, _ = submission_manifest(first.build_manifest(context_with_store(ti, store)))
    hook = KubeflowJobHook(conn_id="chaos")
    hook.create_job("TFJob", with_submission_id(body, recorded["submission"]), "default")
    retry = make_operator(worker=1)
    result = retry.execute(context_with_store(ti.next_try(), store))
    assert result["state"] == "succeeded" and result["name"] == recorded["name"]
    assert_one_job_and_nothing_left(hook, ti)


@pytest.mark.parametrize("deferrable", [False, True])
def test_the_sensor_waits_through_faults(chaos: LocalCluster, deferrable: bool) -> None:
    ti = TaskInstance()
    # Deferred but never resumed: the job runs while the sensor waits for it.
    name = defer(make_operator(worker=1, deferrable=True), ti, context_with_store(ti)).trigger.name
    chaos.set_faults(plan("all", rate=0.5))
    sensor = TFJobSensor(
        task_id="wait",
        name=name,
        namespace="default",
        kubernetes_conn_id="chaos",
        poke_interval=0.1,
        deferrable=deferrable,
        api_retry_timeout=60,
    )
    if deferrable:
        event = fire(defer(sensor, ti, context_with_store(ti)))
        sensor.execute_complete(context_with_store(ti), event)
        assert event["event"] == "reached"
    else:
        sensor.execute(context_with_store(ti))
    chaos.set_faults(None)
    KubeflowJobHook(conn_id="chaos").delete_job("TFJob", name, "default")


# ---------------------------------------------------------------------------------------------------
# Credentials that expire, as exec-plugin kubeconfigs hand them out (EKS, GKE, AKS).


@pytest.fixture(scope="module")
def auth_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(auth=True, token_ttl=900) as cluster:
        yield cluster


@pytest.fixture
def authed(auth_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalCluster]:
    use_cluster(auth_cluster, monkeypatch, "authed")
    yield auth_cluster
    auth_cluster.set_faults(None)


def test_expired_credentials_do_not_fail_two_deferred_tasks_sharing_the_watch(
    authed: LocalCluster, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    tis = [TaskInstance(task_id="a"), TaskInstance(task_id="b")]
    gate = tmp_path / "gate"
    # The replicas stop half-way until the gate opens: the tokens expire while both jobs run.
    ops = [
        make_operator(
            "authed",
            task_id=ti.task_id,
            deferrable=True,
            env={"LINES": str(LINES), "TAG": ti.task_id, "GATE": str(gate)},
        )
        for ti in tis
    ]
    contexts = [context_with_store(ti) for ti in tis]
    deferrals = [defer(op, ti, ctx) for op, ti, ctx in zip(ops, tis, contexts, strict=True)]
    hook = KubeflowJobHook(conn_id="authed")
    names = [d.trigger.name for d in deferrals]

    def both_running() -> bool:
        return all(
            len(
                [
                    p
                    for p in hook.list_job_pods(n, "default")
                    if (p.get("status") or {}).get("phase") == "Running"
                ]
            )
            == 2
            for n in names
        )

    async def run_both() -> list[dict[str, Any]]:
        # Streams are cut all along, so both triggers keep opening requests after the tokens expire.
        authed.set_faults(plan("stream_cut", rate=0.5))
        tasks = [asyncio.create_task(first_event(rebuild_trigger(d))) for d in deferrals]
        await asyncio.to_thread(
            wait_for, lambda: authed.watch_count("tfjobs") >= 1 and both_running(), 90, "both jobs running"
        )
        rejected_before = authed.rejected_requests()
        authed.expire_tokens()
        gate.touch()
        events = await asyncio.gather(*tasks)
        assert authed.rejected_requests() > rejected_before, "no request met the expired token"
        return events

    events = asyncio.run(run_both())
    authed.set_faults(None)
    results = [op.execute_complete(ctx, ev) for op, ctx, ev in zip(ops, contexts, events, strict=True)]
    assert [r["state"] for r in results] == ["succeeded", "succeeded"]
    logged = "".join(capfd.readouterr())
    for ti in tis:
        assert_every_line_once(logged, tag=ti.task_id)
    for ti in tis:
        assert_one_job_and_nothing_left(KubeflowJobHook(conn_id="authed"), ti)


@pytest.mark.parametrize("which", ["sync", "async"])
def test_a_hook_built_before_the_tokens_expired_keeps_working(authed: LocalCluster, which: str) -> None:
    if which == "sync":
        hook = KubeflowJobHook(conn_id="authed")
        hook.list_jobs("TFJob", "default")
        rejected = authed.rejected_requests()
        authed.expire_tokens()
        assert isinstance(hook.list_jobs("TFJob", "default"), list)
    else:
        from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook

        async def scenario() -> None:
            hook = AsyncKubeflowJobHook(conn_id="authed")
            await hook.list_jobs("TFJob", "default")
            authed.expire_tokens()
            assert isinstance(await hook.list_jobs("TFJob", "default"), list)

        rejected = authed.rejected_requests()
        asyncio.run(scenario())
    assert authed.rejected_requests() == rejected + 1  # one 401, then fresh credentials


def test_exec_tokens_are_fetched_again_before_they_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared async client lives as long as the triggerer: its exec-plugin token is fetched again
    after 80% of its lifetime, before any request can meet a 401."""
    from airflow_tfjob.hooks.exec_auth import ExecTokenRefresher
    from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook

    with LocalCluster(auth=True, token_ttl=5, controller=False, runner=False) as cluster:
        use_cluster(cluster, monkeypatch, "short")

        async def scenario() -> int:
            hook = AsyncKubeflowJobHook(conn_id="short")
            await hook.list_jobs("TFJob", "default")
            refresher = (await hook.get_api_client()).configuration.refresh_api_key_hook
            assert isinstance(refresher, ExecTokenRefresher)
            await asyncio.to_thread(wait_for, refresher._due, 10, "80% of the token's lifetime", 0.1)
            await hook.list_jobs("TFJob", "default")
            return refresher.refreshes

        assert asyncio.run(scenario()) == 1
        assert cluster.rejected_requests() == 0


# Runs the local cluster's exec plugin after counting the run in the file given first.
COUNTING_PLUGIN = """
import runpy, sys
open(sys.argv[1], "a").write("run\\n")
sys.argv = [sys.argv[0], *sys.argv[2:]]
runpy.run_module("airflow_tfjob.local.credential", run_name="__main__")
"""


def counted_plugin(authed: LocalCluster, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """The cluster's kubeconfig whose exec plugin counts its runs (one line each) in the file returned."""
    import yaml

    runs = tmp_path / "runs"
    runs.touch()
    config = yaml.safe_load(authed.kubeconfig_path.read_text())
    plugin = config["users"][0]["user"]["exec"]
    assert plugin["args"][:2] == ["-m", "airflow_tfjob.local.credential"]
    plugin["args"] = ["-c", COUNTING_PLUGIN, str(runs), *plugin["args"][2:]]
    return config, runs


def use_counted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, config: dict[str, Any]) -> None:
    """The connection "counted", reading `config` from a kubeconfig file."""
    import yaml

    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    use_connection(monkeypatch, "counted", kube_config_path=str(tmp_path / "kubeconfig"))


@pytest.mark.parametrize("source", ["kube_config_path", "kube_config", "config_dict"])
def test_an_exec_plugin_runs_once_per_client_build(
    authed: LocalCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, source: str
) -> None:
    """Each source of an exec-plugin kubeconfig: the plugin ran twice per build (the cncf hook's load,
    then one more to keep a loader for the refresh); a plugin like ``aws eks get-token`` takes seconds."""
    from airflow_tfjob.hooks.exec_auth import ExecTokenRefresher
    from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook

    config, runs = counted_plugin(authed, tmp_path)
    hook_args: dict[str, Any] = {}
    if source == "kube_config_path":
        use_counted(monkeypatch, tmp_path, config)
    elif source == "kube_config":
        use_connection(monkeypatch, "counted", kube_config=json.dumps(config))
    else:
        use_connection(monkeypatch, "counted")
        hook_args["config_dict"] = config

    async def one_loop() -> None:
        hook = AsyncKubeflowJobHook(conn_id="counted", **hook_args)
        assert isinstance(await hook.list_jobs("TFJob", "default"), list)
        assert isinstance((await hook.get_api_client()).configuration.refresh_api_key_hook, ExecTokenRefresher)
        await AsyncKubeflowJobHook(conn_id="counted", **hook_args).list_jobs("TFJob", "default")  # the shared client

    asyncio.run(one_loop())
    assert runs.read_text().count("run") == 1
    asyncio.run(one_loop())  # a new loop builds its own client
    assert runs.read_text().count("run") == 2


def test_a_task_runs_the_exec_plugin_once_per_client_it_needs(
    authed: LocalCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A synchronous task needs two clients, the worker's and its follow's event loop's: it made a
    hook, and so ran the plugin, for each step (three runs); a poking sensor made one per poke."""
    config, runs = counted_plugin(authed, tmp_path)
    use_counted(monkeypatch, tmp_path, config)
    ti = TaskInstance()
    op = make_operator("counted", worker=1, env={"LINES": "3"})
    assert op.execute(context_with_store(ti))["state"] == "succeeded"
    assert runs.read_text().count("run") == 2

    sensor = TFJobSensor(task_id="watch", kubernetes_conn_id="counted", name="never-created", namespace="default")
    for _ in range(3):
        assert sensor.poke(context_with_store(ti)) is False
    assert runs.read_text().count("run") == 3


def test_disable_verify_ssl_applies_to_the_async_client(authed: LocalCluster, tmp_path: Path) -> None:
    import aiohttp
    import yaml

    from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook

    config = yaml.safe_load(authed.kubeconfig_path.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"].pop("certificate-authority-data", None)  # a server this machine cannot verify
    unverifiable = tmp_path / "kubeconfig"
    unverifiable.write_text(yaml.safe_dump(config))

    async def list_with(**kwargs: Any) -> list[dict[str, Any]]:
        return await AsyncKubeflowJobHook(conn_id="authed", config_file=str(unverifiable), **kwargs).list_jobs("TFJob",
            "default"
        )

    # A certificate the client cannot verify is not a passing fault: it fails at once, unretried.
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        asyncio.run(list_with())
    assert isinstance(asyncio.run(list_with(disable_verify_ssl=True)), list)


@pytest.mark.parametrize("fail", [False, True])
def test_a_cleanup_that_keeps_failing_never_changes_the_jobs_outcome(chaos: LocalCluster, fail: bool) -> None:
    ti = TaskInstance()
    env = {"LINES": "3"} | ({"FAIL": "1"} if fail else {})
    program = PROGRAM + "\nimport sys\nsys.exit(1 if os.environ.get('FAIL') else 0)\n"
    op = make_operator(worker=1, env=env, command=[sys.executable, "-c", program], api_retry_timeout=1)
    # Only deletions fail: the job runs and is followed normally, its cleanup (cleanPodPolicy All) cannot.
    chaos.set_faults(FaultPlan(seed=4, rate=1.0, kinds=("unavailable",), verbs=("DELETE",)))
    context = context_with_store(ti)
    try:
        if fail:
            with pytest.raises(AirflowException, match=r"failed \(TFJobFailed\)"):
                op.execute(context)
        else:
            assert op.execute(context)["state"] == "succeeded"
    finally:
        chaos.set_faults(None)
    assert "503" in ti.xcoms["cleanup_error"]["error"]
    assert "pods of TFJob" in ti.xcoms["cleanup_error"]["left_behind"]
    hook = KubeflowJobHook(conn_id="chaos")
    name = the_jobs(hook, ti)[0]["metadata"]["name"]
    assert hook.list_job_pods(name, "default"), "the pods the failed cleanup left are still there"
    hook.delete_job("TFJob", name, "default")
    wait_for(lambda: not hook.list_job_pods(name, "default"), 60, "the pods to go with their job")
