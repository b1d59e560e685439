"""KubeflowJobTrigger in an asyncio loop against the local cluster: outcomes, deadline, faults, kill, sharing."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from watch_support import (
    Api,
    TcpProxy,
    failed_status,
    running_status,
    succeeded_status,
    tfjob_manifest,
    unique,
    wait_until,
)

from airflow_tfjob.hooks import jobwatch as watch
from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

# Jobs whose status the test writes have no pods: nothing to log, no start-up to time.
QUIET = {"get_logs": False, "startup_timeout": None}
SLEEPER = ["python", "-c", "import time; time.sleep(600)"]


async def _collect(trigger: KubeflowJobTrigger) -> list[dict[str, Any]]:
    return [event.payload async for event in trigger.run()]


def _trigger(name: str, ns: str, conn: str, **kwargs: Any) -> KubeflowJobTrigger:
    kwargs.setdefault("options", QUIET)
    return KubeflowJobTrigger(name=name, namespace=ns, kubernetes_conn_id=conn, **kwargs)


def test_serialize_round_trip() -> None:
    trigger = KubeflowJobTrigger(
        name="job",
        namespace="team",
        kubernetes_conn_id="k8s",
        cluster_context="ctx",
        config_file="/tmp/kubeconfig",
        in_cluster=False,
        options={"log_replicas": "all", "get_logs": True, "startup_timeout": 30.0},
        cursors={"worker-0/tensorflow/1": {"time": "2025-01-01T00:00:00.1Z", "count": 2}},
        deadline=1_900_000_000.5,
        delete_on_kill=False,
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_tfjob.triggers.deferral.KubeflowJobTrigger"
    module, _, cls_name = classpath.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), cls_name)(**json.loads(json.dumps(kwargs)))
    assert rebuilt.serialize() == (classpath, kwargs)
    # The deadline travels once, in the options; the previous release's `deadline` kwarg is read into them.
    assert "deadline" not in kwargs and kwargs["options"]["deadline"] == 1_900_000_000.5
    assert kwargs["delete_on_kill"] is False and rebuilt.deadline == 1_900_000_000.5


async def test_succeeded_yields_one_event(api: Api, k8s_conn: str) -> None:
    ns = await api.namespace(unique("t"))
    name = unique("ok")
    await api.create(ns, tfjob_manifest(name))
    run = asyncio.ensure_future(_collect(_trigger(name, ns, k8s_conn)))
    await wait_until(lambda: any(w["namespace"] == ns and w["connected"] for w in watch.active_watchers()))
    await api.set_status(ns, name, running_status(name, ns))
    # The running state reached the watch (an event after its list): it must not fire the trigger.
    await wait_until(lambda: any(w["namespace"] == ns and w["events"] >= 1 for w in watch.active_watchers()))
    assert not run.done(), "a running job must not fire the trigger"
    await api.set_status(ns, name, succeeded_status(name, ns))
    events = await asyncio.wait_for(run, 30)
    assert len(events) == 1
    (event,) = events
    assert event["event"] == "succeeded"
    assert (event["name"], event["namespace"]) == (name, ns)
    assert event["status"]["state"] == "succeeded"
    assert event["status"]["replica_statuses"]["Worker"]["succeeded"] == 1
    assert event["deleted"] is False
    json.dumps(event)  # the payload travels through the metadata DB
    assert await api.get(ns, name) is not None


async def test_failed(api: Api, k8s_conn: str) -> None:
    ns = await api.namespace(unique("t"))
    name = unique("bad")
    await api.create(ns, tfjob_manifest(name))
    run = asyncio.ensure_future(_collect(_trigger(name, ns, k8s_conn)))
    await api.set_status(ns, name, failed_status(name, ns))
    (event,) = await asyncio.wait_for(run, 30)
    assert event["event"] == "failed"
    assert event["status"]["state"] == "failed"
    assert "Worker" in event["status"]["failed_replica_types"]
    assert "1 Worker replica(s) failed" in event["message"] + event["status"]["message"]


async def test_apache_airflow_67227_deadline_deletes_job_and_pods(api: Api, k8s_conn: str) -> None:
    """apache/airflow#67227: a deferred task's execution_timeout is not applied by Airflow 3.3.2."""
    ns = await api.namespace(unique("t"))
    name = unique("slow")
    await api.create(ns, tfjob_manifest(name, external=False, command=SLEEPER))
    await wait_until(lambda: api.pods(ns, name), timeout=30)
    trigger = _trigger(name, ns, k8s_conn, options={"get_logs": False}, deadline=time.time() + 2)
    (event,) = await asyncio.wait_for(_collect(trigger), 60)
    assert event["event"] == "timeout"
    assert event["deleted"] is True
    assert await api.get(ns, name) is None
    await wait_until(lambda: _no_pods(api, ns, name), timeout=30)


async def _no_pods(api: Api, ns: str, name: str) -> bool:
    return not await api.pods(ns, name)


async def test_apache_airflow_36090_62398_on_kill_deletes_job_and_pods_cleanup_does_not(
    api: Api, k8s_conn: str
) -> None:
    """apache/airflow#36090, #62398: a user's kill of a deferred task must stop its workload."""
    ns = await api.namespace(unique("t"))
    name = unique("kill")
    await api.create(ns, tfjob_manifest(name, external=False, command=SLEEPER))
    await wait_until(lambda: api.pods(ns, name), timeout=30)
    trigger = _trigger(name, ns, k8s_conn, options={"get_logs": False})
    run = asyncio.ensure_future(_collect(trigger))
    await wait_until(lambda: any(w["namespace"] == ns and w["subscribers"] for w in watch.active_watchers()))
    # What the triggerer does on a restart: cancel the run, then cleanup(). The job must survive.
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    await trigger.cleanup()
    assert await api.get(ns, name) is not None
    assert await api.pods(ns, name)
    # What it does on a user's kill (apache/airflow#36090): cancel, then on_kill().
    await trigger.on_kill()
    assert await api.get(ns, name) is None
    await wait_until(lambda: _no_pods(api, ns, name), timeout=30)


class _StateChannel:
    """The triggerer's supervisor channel as a trigger's cleanup uses it: it answers a task-state
    request with ``state`` (and every other request with nothing)."""

    def __init__(self, state: str | None) -> None:
        self.state = state

    def send(self, message: Any) -> Any:  # the task SDK's blocking calls (a connection's masking)
        return None

    async def asend(self, message: Any) -> Any:
        from types import SimpleNamespace

        if type(message).__name__ != "GetTaskStates":
            return None
        states = {} if self.state is None else {message.task_ids[0]: self.state}
        return SimpleNamespace(task_states={message.run_ids[0]: states})


async def test_before_airflow_3_3_cleanup_deletes_the_job_of_a_task_no_longer_deferred(
    api: Api, k8s_conn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow 3.0 to 3.2 call no on_kill: the trigger tells a user's kill (the task marked failed,
    success or cleared) from a restart (the task still deferred) by the task's state at cleanup."""
    from types import SimpleNamespace

    from airflow.sdk.execution_time import task_runner

    from airflow_tfjob import version_compat

    monkeypatch.setattr(version_compat, "AIRFLOW_V_3_3_PLUS", False)
    ns = await api.namespace(unique("t"))
    name = unique("oldkill")
    await api.create(ns, tfjob_manifest(name, external=False, command=SLEEPER))
    await wait_until(lambda: api.pods(ns, name), timeout=30)
    for state, deleted in (("deferred", False), (None, False), ("failed", True)):
        monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", _StateChannel(state), raising=False)
        trigger = _trigger(name, ns, k8s_conn, options={"get_logs": False})
        trigger.task_instance = SimpleNamespace(dag_id="d", task_id="train", run_id="r", map_index=-1)
        run = asyncio.ensure_future(_collect(trigger))
        await wait_until(lambda: any(w["namespace"] == ns and w["subscribers"] for w in watch.active_watchers()))
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        await trigger.cleanup()
        assert (await api.get(ns, name) is None) is deleted, state
    await wait_until(lambda: _no_pods(api, ns, name), timeout=30)


async def test_on_kill_keeps_job_when_asked(api: Api, k8s_conn: str) -> None:
    ns = await api.namespace(unique("t"))
    name = unique("keep")
    await api.create(ns, tfjob_manifest(name))
    await _trigger(name, ns, k8s_conn, delete_on_kill=False).on_kill()
    assert await api.get(ns, name) is not None


async def test_triggers_share_one_watch_and_leave_independently(api: Api, k8s_conn: str) -> None:
    ns = await api.namespace(unique("t"))
    first, second = unique("one"), unique("two")
    for n in (first, second):
        await api.create(ns, tfjob_manifest(n))
    run1 = asyncio.ensure_future(_collect(_trigger(first, ns, k8s_conn)))
    run2 = asyncio.ensure_future(_collect(_trigger(second, ns, k8s_conn)))

    def watcher() -> dict[str, Any] | None:
        return next((w for w in watch.active_watchers() if w["namespace"] == ns), None)

    await wait_until(lambda: (watcher() or {}).get("subscribers") == 2)
    run1.cancel()  # one trigger leaves (e.g. moved to another triggerer)
    await asyncio.gather(run1, return_exceptions=True)
    await api.set_status(ns, second, succeeded_status(second, ns))
    (event,) = await asyncio.wait_for(run2, 30)
    assert event["event"] == "succeeded"
    stats = watcher()
    assert stats is not None
    assert stats["watches"] == 1 and stats["lists"] == 1


async def test_stream_cut_mid_run(api: Api, k8s_conn: str, proxy: TcpProxy, proxied_kubeconfig: Path) -> None:
    ns = await api.namespace(unique("t"))
    name = unique("cut")
    await api.create(ns, tfjob_manifest(name))
    run = asyncio.ensure_future(_collect(_trigger(name, ns, k8s_conn, config_file=str(proxied_kubeconfig))))
    await wait_until(lambda: any(w["namespace"] == ns and w["connected"] for w in watch.active_watchers()))
    await proxy.refuse()
    await api.set_status(ns, name, succeeded_status(name, ns))
    # The watch has seen its stream cut and a reconnect refused: it cannot know of the success yet. (60 s:
    # at load 15 the cut and the refused reconnect once took longer than the default 20 s to be counted.)
    await wait_until(lambda: any(w["namespace"] == ns and w["errors"] >= 1 for w in watch.active_watchers()),
                     timeout=60)
    assert not run.done()
    await proxy.start()
    (event,) = await asyncio.wait_for(run, 30)
    assert event["event"] == "succeeded"


async def test_job_deleted_while_waiting_is_an_error(api: Api, k8s_conn: str) -> None:
    ns = await api.namespace(unique("t"))
    name = unique("gone")
    await api.create(ns, tfjob_manifest(name))
    run = asyncio.ensure_future(_collect(_trigger(name, ns, k8s_conn)))
    await wait_until(lambda: any(w["namespace"] == ns and w["subscribers"] for w in watch.active_watchers()))
    await api.delete(ns, name)
    (event,) = await asyncio.wait_for(run, 30)
    assert event["event"] == "error"
    assert name in event["message"]


# --------------------------------------------------------------------------- triggerer restarts

COUNTING = r"""
import os, sys, time
for i in range(8):
    print(f"counted line {i}", flush=True)
    time.sleep(0.05)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.1)
print("counted final", flush=True)
"""


def _deferred_kwargs(tmp_path: Path, **operator_kwargs: Any) -> dict[str, Any]:
    """Defer a real TFJobOperator and return its trigger's serialized kwargs (what the DB holds)."""
    import sys

    from airflow_compat import TaskDeferred
    from operator_support import TaskInstance, context_for

    from airflow_tfjob.operators.tfjob import TFJobOperator

    params: dict[str, Any] = {
        "task_id": "restart",
        "namespace": "default",
        "image": "local/python",
        "worker": 1,
        "command": [sys.executable, "-c", COUNTING, str(tmp_path / "release")],
        "deferrable": True,
        "startup_timeout": 60,
    }
    params.update(operator_kwargs)
    with pytest.raises(TaskDeferred) as deferred:
        TFJobOperator(**params).execute(context_for(TaskInstance()))
    _, kwargs = deferred.value.trigger.serialize()
    return dict(json.loads(json.dumps(kwargs)))


class _Recorder(logging.Handler):
    """Keeps what a trigger writes to its log (the triggerer sends it to the task log)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _recorded(trigger: KubeflowJobTrigger, recorder: _Recorder) -> KubeflowJobTrigger:
    logger = logging.getLogger(f"test.trigger.{id(trigger)}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(recorder)
    trigger._log = logger  # type: ignore[assignment]
    return trigger


async def _stop_and_take_over(
    api: Api, tmp_path: Path, **operator_kwargs: Any
) -> tuple[list[str], list[str], dict[str, Any]]:
    """A trigger follows the counting job until its 8 lines are written, then is stopped (cancelled,
    as a triggerer's shutdown does); once its stop's save is in the cluster, a second trigger built
    from the same kwargs takes over after the start-up window has passed, and the job finishes.
    (lines before, lines after, the event)"""
    from airflow_tfjob.triggers.positions import TAKE_OVER as RESUME_MARKER
    from airflow_tfjob.triggers.positions import entry_key

    kwargs = _deferred_kwargs(tmp_path, **operator_kwargs)
    # The start-up clock is relative (60 s) and counts from the deferral; 0.1.0's absolute
    # `startup_deadline` is still read (the take-over below passes one).
    assert kwargs["deferred_at"] and kwargs["options"]["startup_timeout"] == 60
    assert "startup_deadline" not in kwargs and kwargs["options"]["startup_from"] is None

    before, after = _Recorder(), _Recorder()
    first = asyncio.ensure_future(_collect(_recorded(KubeflowJobTrigger(**kwargs), before)))
    await wait_until(lambda: any("counted line 7" in x for x in before.lines), timeout=60)
    assert not any(x.startswith(RESUME_MARKER) for x in before.lines), "a deferral's first run is no take-over"
    first.cancel()  # the triggerer stops...
    await asyncio.gather(first, return_exceptions=True)

    # ...having saved where it stopped writing. The stop waits for its save at most STOP_SAVE_TIMEOUT
    # (5 s), and the save goes on past it: in the compatibility lane, at the lowest CPU priority beside
    # the alone stage, it landed after the bound, and after the successor had read no position.
    async def stop_saved() -> bool:
        entry = (await api.saved_positions(kwargs["namespace"])).get(entry_key("tfjobs", kwargs["name"]))
        return bool(entry and entry["final"])

    await wait_until(stop_saved, timeout=60)

    # ...and its successor starts the same trigger after the start-up window has passed: the job
    # had started, so it is not failed for it.
    restarted = dict(kwargs, startup_deadline=time.time() - 1)
    second = asyncio.ensure_future(_collect(_recorded(KubeflowJobTrigger(**restarted), after)))
    await wait_until(lambda: any(x.startswith(RESUME_MARKER) for x in after.lines), timeout=60)
    (tmp_path / "release").write_text("go")
    (event,) = await asyncio.wait_for(second, 60)
    assert event["event"] == "succeeded", event
    assert [x for x in after.lines if RESUME_MARKER in x] == after.lines[:1], "one marker, first"
    return before.lines, after.lines, event


def _counted(lines: list[str]) -> list[str]:
    return [x for record in lines for x in record.splitlines() if "counted " in x]


async def test_a_take_over_after_a_stop_resumes_where_the_stopped_trigger_stopped_writing(
    api: Api, k8s_conn: str, tmp_path: Path
) -> None:
    """Local task logs: the stopped trigger saved the position it had written up to, so its successor
    neither loses nor repeats a line, and its marker says so."""
    before, after, _ = await _stop_and_take_over(api, tmp_path)
    assert "no line above is repeated" in after[0], after[0]
    assert _counted(before) == [f"[worker-0] counted line {i}" for i in range(8)]
    assert _counted(after) == ["[worker-0] counted final"], "nothing repeated, nothing lost"


REPORTING = COUNTING.replace("import os, sys, time\n", "import os, sys, time\nprint('loss=0.25', flush=True)\n")


async def test_a_take_over_keeps_what_the_stopped_triggers_trackers_had_read(
    api: Api, k8s_conn: str, tmp_path: Path
) -> None:
    """The metric was printed and shown before the stop, and its successor resumes after it: the
    master's lines since the deferral are read again for the trackers (metrics, progress, checkpoints,
    a returned value), whose state went with the stopped triggerer, and are not shown again."""
    import sys

    command = [sys.executable, "-c", REPORTING, str(tmp_path / "release")]
    before, after, event = await _stop_and_take_over(api, tmp_path, command=command, metrics=["loss"])
    assert any("[worker-0] loss=0.25" in x for x in before)
    assert "no line above is repeated" in after[0], after[0]
    assert not any("loss=0.25" in x for x in after), "shown again"
    assert _counted(after) == ["[worker-0] counted final"]
    assert float(event["parts"]["metrics"]["loss"]) == 0.25, event["parts"]


async def test_a_take_over_with_remote_task_logs_reads_again_from_the_deferral(
    api: Api, k8s_conn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Remote task logs keep nothing of what a stopped triggerer wrote (Airflow uploads a trigger's log
    when it finishes there): the successor reads every line again from the deferral, and says why."""
    monkeypatch.setenv("AIRFLOW__LOGGING__REMOTE_LOGGING", "True")
    before, after, _ = await _stop_and_take_over(api, tmp_path)
    assert "with remote task logs" in after[0], after[0]
    assert _counted(before) == [f"[worker-0] counted line {i}" for i in range(8)]
    assert _counted(after) == [*(f"[worker-0] counted line {i}" for i in range(8)), "[worker-0] counted final"]


# A replica's start-up: its backlog in one write (a framework's banner), then more lines when told.
START_UP = r"""
import os, sys, time
sys.stdout.write("".join(f"start-up line {i}\n" for i in range(40)))
sys.stdout.flush()
while not os.path.exists(sys.argv[1] + ".more"):
    time.sleep(0.05)
for i in range(5):
    print(f"later line {i}", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.1)
print("counted final", flush=True)
"""

# The first triggerer, in a process of its own so that it can be SIGKILLed: one trigger, its log to a
# file (each record written as it is logged), no periodic save within the test; argv[3] is how long a
# captured position settles before it is sent (an hour: it never is, the triggerer saves nothing).
FIRST_TRIGGERER = """
import asyncio, json, logging, sys
from airflow_tfjob.triggers import positions
positions.SAVE_INTERVAL = 3600.0
positions.SETTLE = float(sys.argv[3])
from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

logger = logging.getLogger("first-triggerer")
logger.addHandler(logging.FileHandler(sys.argv[2]))
logger.setLevel(logging.INFO)
logger.propagate = False
trigger = KubeflowJobTrigger(**json.loads(sys.argv[1]))
trigger._log = logger

async def main():
    async for event in trigger.run():
        print(json.dumps(event.payload), flush=True)

asyncio.run(main())
"""


@pytest.mark.parametrize("first_save", ["sent", "never sent"])
async def test_a_triggerer_killed_right_after_its_first_lines_repeats_only_what_it_wrote_after_saving(
    api: Api, k8s_conn: str, tmp_path: Path, first_save: str
) -> None:
    """Issue 39: a triggerer SIGKILLed in the first seconds of a follow. Its follow's first lines (the
    replica's 40-line start-up) start a save at once, sent SETTLE seconds later, not at the next
    interval (an hour here, so no other save happens); then the replica writes 5 more lines, and the
    triggerer is SIGKILLed as soon as they are shown.

    "sent": the successor repeats none of the 40 lines the save covered, repeats the 5 written after
    it, and counts them in its take-over note. "never sent" (the kill within the settling, here made an
    hour long): nothing was saved, so the successor reads again from the deferral, and every line it
    repeats (all 45) is counted in its note."""
    import signal
    import subprocess
    import sys

    from airflow_tfjob.triggers.positions import REPEAT_BOUND, SETTLE, entry_key
    from airflow_tfjob.triggers.positions import TAKE_OVER as RESUME_MARKER

    sent = first_save == "sent"
    release = tmp_path / "release"
    kwargs = _deferred_kwargs(tmp_path, command=[sys.executable, "-c", START_UP, str(release)])
    name, ns = kwargs["name"], kwargs["namespace"]
    first_log = tmp_path / "first-triggerer.log"
    first_log.touch()

    def written() -> str:
        return first_log.read_text()

    async def saved() -> dict[str, Any] | None:
        entry = (await api.saved_positions(ns)).get(entry_key("tfjobs", name))
        return entry if entry and (entry["cursors"].get("worker-0") or {}).get("ts") else None

    errors = tmp_path / "first-triggerer.err"
    settle = str(SETTLE if sent else 3600.0)
    with errors.open("w") as stderr:
        first = subprocess.Popen(  # noqa: ASYNC220 (started once; the test's loop waits on the cluster)
            [sys.executable, "-c", FIRST_TRIGGERER, json.dumps(kwargs), str(first_log), settle], stderr=stderr
        )
    entry: dict[str, Any] | None = None
    try:
        try:
            await wait_until(lambda: "start-up line 0" in written(), timeout=90, interval=0.01)
        except AssertionError:
            raise AssertionError(f"no line from the first triggerer:\n{errors.read_text()[-3000:]}") from None
        shown_at = time.time()
        if sent:
            # Sent SETTLE seconds after the first lines, not at the hour's interval: the bound leaves
            # room for a starved loop (the compatibility lane runs at nice 19).
            await wait_until(saved, timeout=60, interval=0.02)
            entry = await saved()
            assert entry is not None and entry["final"] is False
        save_seen = time.time() - shown_at
        assert all(f"start-up line {i}" in written() for i in range(40))
        Path(f"{release}.more").write_text("go")  # noqa: ASYNC240
        await wait_until(lambda: "later line 4" in written(), timeout=30, interval=0.01)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert await saved() == entry, "no save but the first lines' one: the kill came before the interval"
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)
    assert RESUME_MARKER not in written()

    after = _Recorder()
    second = asyncio.ensure_future(_collect(_recorded(KubeflowJobTrigger(**kwargs), after)))
    await wait_until(lambda: any(x.startswith(RESUME_MARKER) for x in after.lines), timeout=60)
    if entry is not None:  # the final line comes once the repeat window has passed: only the 5 count
        await asyncio.sleep(max(0.0, entry["saved_at"] + REPEAT_BOUND - time.time()) + 0.3)
    release.write_text("go")
    (event,) = await asyncio.wait_for(second, 60)
    assert event["event"] == "succeeded", event

    shown = _shown(after.lines)
    marker = shown[0]
    repeated = [x for x in shown if "start-up line" in x or "later line" in x]
    later = [f"[worker-0] later line {i}" for i in range(5)]
    notes = [x for x in shown if "--- take-over: the" in x]
    if sent:
        assert "last saved its position" in marker and "are counted" in marker, marker
        assert repeated == later, f"only the lines written after the first save repeat: {repeated}"
    else:
        assert "saved no position" in marker and "are counted" in marker, marker
        assert repeated == [*(f"[worker-0] start-up line {i}" for i in range(40)), *later], repeated
        assert "before the stopped triggerer saved any position" in notes[0], notes
    assert len(notes) == 1 and f"the {len(repeated)} lines above" in notes[0], notes
    assert [x for x in shown if "counted final" in x] == ["[worker-0] counted final"], "not counted, once"
    print(
        f"\ntake-over in the first seconds (first save {first_save}): 40 start-up lines shown"
        + (f", their save seen {save_seen:.2f} s after (SETTLE {SETTLE} s)" if sent else "")
        + f"; SIGKILL after 5 more lines; the successor repeated {len(repeated)} "
        f"({len([x for x in repeated if 'start-up' in x])} of the 40), "
        f"counted {notes[0].split('the ', 2)[1].split(' lines')[0]} in its note"
    )


def _shown(records: list[str]) -> list[str]:
    return [x for record in records for x in record.splitlines()]


class _Routed(_Recorder):
    """Keeps each record with the trigger Airflow's triggerer would write it to: the ``trigger_id`` its
    ``run_trigger`` binds as a structlog context variable, as it stands when the log call is made."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[tuple[Any, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        import structlog

        super().emit(record)
        self.records.append((structlog.contextvars.get_contextvars().get("trigger_id"), record.getMessage()))


async def test_each_triggers_lines_reach_its_own_log_whatever_task_writes_them(
    k8s_conn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two triggers on one loop, each run in a task bound to its trigger id as Airflow's triggerer does.
    The namespace's log position book (one task for both) saves at every loop turn here, so that its
    saves find lines the follows have not written yet and write them: every line still goes to its
    own trigger's log (a clean-clone run lost a line of one task to another task's log this way)."""
    import structlog

    from airflow_tfjob.triggers import positions

    monkeypatch.setattr(positions, "SAVE_INTERVAL", 0.0)
    monkeypatch.setattr(positions, "SETTLE", 0.0)
    (tmp_path / "release").write_text("go")
    routed = _Routed()

    async def as_airflow_runs(trigger_id: int, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
        structlog.contextvars.bind_contextvars(trigger_id=trigger_id)
        return await _collect(_recorded(KubeflowJobTrigger(**kwargs), routed))

    jobs = {k: _deferred_kwargs(tmp_path) for k in (1, 2)}
    names = {k: kwargs["name"] for k, kwargs in jobs.items()}
    done = await asyncio.wait_for(asyncio.gather(*(as_airflow_runs(k, kw) for k, kw in jobs.items())), 90)
    assert [events[0]["event"] for events in done] == ["succeeded", "succeeded"], done
    for k in names:
        mine = [
            line for owner, record in routed.records if owner == k for line in record.splitlines()
        ]
        assert [x for x in mine if "counted " in x] == [
            *(f"[worker-0] counted line {i}" for i in range(8)),
            "[worker-0] counted final",
        ], mine
        other = names[3 - k]
        assert not [x for x in mine if other in x], f"trigger {k}'s log has lines of {other}"
    assert {owner for owner, _ in routed.records} == {1, 2}, [r for r in routed.records if r[0] not in (1, 2)]


async def test_startup_deadline_is_absolute_across_restarts(k8s_conn: str, tmp_path: Path) -> None:
    """A trigger started after its deferral's start-up deadline, for a job that never started, fails
    at once with the scheduling reason instead of granting a fresh startup_timeout."""
    kwargs = _deferred_kwargs(tmp_path, gpus=64, startup_timeout=600)
    kwargs["startup_deadline"] = time.time() + 1
    started = time.monotonic()
    (event,) = await asyncio.wait_for(_collect(KubeflowJobTrigger(**kwargs)), 60)
    assert event["event"] == "startup_timeout", event
    assert time.monotonic() - started < 30
    assert "nvidia.com/gpu" in event["message"] or "Unschedulable" in event["message"]
    from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook

    KubeflowJobHook(conn_id=k8s_conn).delete_job("TFJob", kwargs["name"], kwargs["namespace"])


async def test_queued_job_gets_its_whole_startup_window_after_a_restart(
    k8s_conn: str, tmp_path: Path
) -> None:
    """A job queued (suspended, e.g. by Kueue) past its deferral's start-up deadline, with a triggerer
    restart while it waits, must get the whole startup_timeout once admitted, not fail on admission."""
    from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook
    from airflow_tfjob.triggers.runs import ANNOTATION_TRIGGER_STARTED

    (tmp_path / "release").write_text("go")  # the replica finishes as soon as it runs
    kwargs = _deferred_kwargs(tmp_path, suspend=True, startup_timeout=60)
    name, ns = kwargs["name"], kwargs["namespace"]
    hook = KubeflowJobHook(conn_id=k8s_conn)
    try:
        await wait_until(
            lambda: any(
                c.get("type") == "Suspended" and c.get("status") == "True"
                for c in (hook.get_job("TFJob", name, ns).get("status") or {}).get("conditions") or []
            ),
            timeout=30,
        )
        # An earlier run of this deferral's trigger stamped the job: this run is a restart.
        stamp = repr(float(kwargs["deferred_at"]))
        hook.patch_job("TFJob", name, ns, {"metadata": {"annotations": {ANNOTATION_TRIGGER_STARTED: stamp}}})
        kwargs["startup_deadline"] = time.time() - 100  # it passed while the job was queued
        trigger = KubeflowJobTrigger(**kwargs)
        run = asyncio.ensure_future(_collect(trigger))
        await wait_until(lambda: trigger._job_read or run.done(), timeout=30)
        hook.patch_job("TFJob", name, ns, {"spec": {"runPolicy": {"suspend": False}}})  # admitted
        (event,) = await asyncio.wait_for(run, 60)
        assert event["event"] == "succeeded", event
    finally:
        hook.delete_job("TFJob", name, ns)
