"""KubeflowJobTrigger under a real `airflow triggerer` process with a real (SQLite) metadata DB.

The test puts task instances into the DEFERRED state on a KubeflowJobTrigger the way a deferring task does
(a Trigger row built from the trigger object, the TI pointing at it with next_method
``execute_complete``), then runs ``airflow triggerer``:

- the job completes while deferred: the triggerer fires the event and the TI is scheduled to resume
  with ``next_kwargs={"event": payload}`` (what ``execute_complete`` receives);
- a user marks a deferred TI failed: the triggerer cancels the trigger as a user action, calls
  ``on_kill()``, and the TFJob and its pods are deleted (apache/airflow#36090, #62398).

Running the operator's ``execute_complete`` itself belongs to the operator's tests (``airflow dags test``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from triggerer_support import airflow_home, kill_triggerer, start_triggerer, stop_triggerer
from watch_support import Api, succeeded_status, tfjob_manifest, unique, wait_until

from airflow_tfjob.version_compat import AIRFLOW_V_3_3_PLUS

# A backstop past the waits' own bounds (each says what it waited for): in the compatibility lane, at
# nice 19 beside the alone stage, the kill test took 160-284 s (ci23, ci24, ci27), and 280 s cut it off.
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

SLEEPER = ["python", "-c", "import time; time.sleep(600)"]
DAG_ID = "tfjob_triggerer_test"
RESTART_DAG_ID = "tfjob_triggerer_restart_test"
OPERATOR_DAG_ID = "tfjob_triggerer_operator_test"
FIRST_LINES_DAG_ID = "tfjob_triggerer_first_lines_test"

DAG_FILE = f'''
from airflow.sdk import DAG
from airflow.providers.standard.operators.empty import EmptyOperator
import datetime

with DAG("{DAG_ID}", schedule=None, start_date=datetime.datetime(2025, 1, 1)):
    EmptyOperator(task_id="succeeds")
    EmptyOperator(task_id="killed")

with DAG("{RESTART_DAG_ID}", schedule=None, start_date=datetime.datetime(2025, 1, 1)):
    EmptyOperator(task_id="restarted")

with DAG("{OPERATOR_DAG_ID}", schedule=None, start_date=datetime.datetime(2025, 1, 1)):
    EmptyOperator(task_id="train")

with DAG("{FIRST_LINES_DAG_ID}", schedule=None, start_date=datetime.datetime(2025, 1, 1)):
    EmptyOperator(task_id="restarted")
'''

# Runs in a subprocess with the test's Airflow environment: the ORM work a deferring task and a
# user's "mark failed" do, kept out of the test process so its Airflow settings stay untouched. What the
# tests poll (states, the triggerer a trigger is assigned to, the resume event) is read from the SQLite
# file directly (_states): a process that imports Airflow's ORM costs seconds of CPU per poll.
DEFER_SCRIPT = """
import json, sys, datetime
try:
    from airflow.models.dagbag import DBDagBag
    latest = lambda dag_id, session: DBDagBag().get_latest_version_of_dag(dag_id, session=session)
except ImportError:  # Airflow 3.0: the serialized DAG straight from its table
    from airflow.models.serialized_dag import SerializedDagModel
    latest = lambda dag_id, session: SerializedDagModel.get_dag(dag_id, session=session)
from airflow.models.taskinstance import TaskInstance
from airflow.models.trigger import Trigger
from airflow.utils.session import create_session
from airflow.utils.state import DagRunState, TaskInstanceState
from airflow.utils.types import DagRunType, DagRunTriggeredByType
from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

action, dag_id = sys.argv[1], sys.argv[2]
with create_session() as session:
    if action == "defer":
        specs = json.loads(sys.argv[3])
        dag = latest(dag_id, session)
        now = datetime.datetime.now(datetime.timezone.utc)
        run = dag.create_dagrun(
            run_id="test_run", logical_date=now, run_after=now, run_type=DagRunType.MANUAL,
            triggered_by=DagRunTriggeredByType.TEST, state=DagRunState.RUNNING, session=session,
        )
        for task_id, kwargs in specs.items():
            ti = run.get_task_instance(task_id, session=session)
            trigger = Trigger.from_object(KubeflowJobTrigger(**kwargs))
            session.add(trigger)
            session.flush()
            ti.state = TaskInstanceState.DEFERRED
            ti.trigger_id = trigger.id
            ti.next_method = "execute_complete"
            ti.next_kwargs = {}
            session.merge(ti)
    elif action == "fail":
        ti = session.query(TaskInstance).filter_by(dag_id=dag_id, task_id=sys.argv[3]).one()
        ti.state = TaskInstanceState.FAILED
"""


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    yield airflow_home(tmp_path_factory.mktemp("airflow-home"), DAG_FILE)


def _orm(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", DEFER_SCRIPT, *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _states(env: dict[str, str], dag_id: str = DAG_ID) -> dict[str, Any]:
    """Each task instance of the DAG's run: its state, next_kwargs as the resumed task receives them, its
    trigger, and the triggerer that holds the trigger."""
    database = Path(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].removeprefix("sqlite:///"))
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as db:
        rows = db.execute(
            "select ti.task_id, ti.state, ti.next_kwargs, ti.trigger_id, t.triggerer_id from task_instance ti"
            " left join trigger t on t.id = ti.trigger_id where ti.dag_id = ?",
            (dag_id,),
        ).fetchall()
    return {
        task_id: {
            "state": state,
            "next_kwargs": _deserialized(json.loads(kwargs)) if kwargs else None,
            "trigger_id": trigger_id,
            "triggerer_id": triggerer_id,
        }
        for task_id, state, kwargs, trigger_id, triggerer_id in rows
    }


def _deserialized(value: Any) -> Any:
    """A value of an ExtendedJSON column as Airflow reads it back: its serializer wraps each dict (and
    any other typed value) as {"__type": ..., "__var": ...}; the events here hold dicts, lists and
    plain JSON values only."""
    if isinstance(value, dict):
        if set(value) == {"__type", "__var"}:
            return _deserialized(value["__var"])
        return {key: _deserialized(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_deserialized(item) for item in value]
    return value


async def test_apache_airflow_36090_62398_job_completes_while_deferred_and_kill_deletes(
    airflow_env: dict[str, str], local_cluster: Any, k8s_conn: str, tmp_path: Path
) -> None:
    env = dict(airflow_env)
    env["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"]
    async with Api(Path(local_cluster.kubeconfig_path)) as api:
        ns = await api.namespace(unique("trg"))
        done_job, killed_job = unique("done"), unique("killed")
        await api.create(ns, tfjob_manifest(done_job))
        await api.create(ns, tfjob_manifest(killed_job, external=False, command=SLEEPER))
        await wait_until(lambda: api.pods(ns, killed_job), timeout=30)
        specs = {
            "succeeds": {
                "name": done_job,
                "namespace": ns,
                "options": {"get_logs": False, "startup_timeout": None},
            },
            "killed": {"name": killed_job, "namespace": ns, "options": {"get_logs": False}},
        }
        await asyncio.to_thread(_orm, env, "defer", DAG_ID, json.dumps(specs))

        triggerer = start_triggerer(env, tmp_path / "triggerer.log")
        try:
            # The triggerer picks both triggers up; the first job then succeeds while its task is deferred.
            async def assigned() -> bool:
                states = await asyncio.to_thread(_states, env)
                return all(ti["triggerer_id"] for ti in states.values())

            await wait_until(assigned, timeout=90, interval=1.0)
            await api.set_status(ns, done_job, succeeded_status(done_job, ns))

            async def resumed() -> bool:
                ti = (await asyncio.to_thread(_states, env))["succeeds"]
                return bool(ti["state"] == "scheduled" and ti["next_kwargs"])

            await wait_until(resumed, timeout=90, interval=1.0)
            ti = (await asyncio.to_thread(_states, env))["succeeds"]
            event = ti["next_kwargs"]["event"]
            assert event["event"] == "succeeded" and event["name"] == done_job
            assert await api.get(ns, done_job) is not None, "success must not delete the job"

            # A user marks the other deferred task failed: the triggerer must call on_kill.
            assert await api.get(ns, killed_job) is not None
            await asyncio.to_thread(_orm, env, "fail", DAG_ID, "killed")

            async def killed_gone() -> bool:
                return await api.get(ns, killed_job) is None and not await api.pods(ns, killed_job)

            await wait_until(killed_gone, timeout=90, interval=0.5)
        finally:
            await asyncio.to_thread(stop_triggerer, triggerer)
        # The trigger's own log lines reach the task's log (the triggerer writes <task log>.trigger.<id>.log).
        logs = Path(env["AIRFLOW_HOME"]) / "logs" / f"dag_id={DAG_ID}" / "run_id=test_run"
        killed_log = "".join(p.read_text() for p in (logs / "task_id=killed").glob("*.trigger.*.log"))
        if AIRFLOW_V_3_3_PLUS:
            assert "Trigger cancelled by user action, invoking on_kill" in killed_log
        else:  # no on_kill: the trigger's cleanup read the task's state
            assert "it was killed while deferred" in killed_log
        assert f"Deleting TFJob {ns}/{killed_job} because the task was killed" in killed_log



async def _defer_a_job(
    api: Api, env: dict[str, str], dag_id: str, task_id: str, ns_prefix: str, prefix: str, program: str,
    release: Path,
) -> tuple[str, str, Path]:  # fmt: skip
    """A TFJob running ``program`` (told to go on by the file ``release``) and ``task_id`` deferred on its
    trigger (every replica's lines, a 120 s start-up); its namespace, name and the run's log folder."""
    import time

    ns = await api.namespace(unique(ns_prefix))
    name = unique(prefix)
    await api.create(ns, tfjob_manifest(name, external=False, command=["python", "-c", program, str(release)]))
    now = time.time()
    specs = {
        task_id: {
            "name": name,
            "namespace": ns,
            "options": {"log_replicas": "all", "startup_timeout": 120},
            "deferred_at": now,
            "startup_deadline": now + 120,
        }
    }
    await asyncio.to_thread(_orm, env, "defer", dag_id, json.dumps(specs))
    return ns, name, Path(env["AIRFLOW_HOME"]) / "logs" / f"dag_id={dag_id}" / "run_id=test_run"

COUNTING = r"""
import os, sys, time
for i in range(8):
    print(f"counted line {i}", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.1)
print("counted final", flush=True)
"""


async def test_a_killed_triggerer_s_successor_resumes_without_losing_or_repeating_lines(
    airflow_env: dict[str, str], local_cluster: Any, k8s_conn: str, tmp_path: Path
) -> None:
    """A real triggerer is SIGKILLed while a TFJob runs, once its periodic save covers the 8 lines it
    wrote, and another one starts: the job is not deleted (a restart is not a kill), and the new trigger
    resumes from the saved position, so the task's log (local files) has every line once.

    A graceful stop (SIGTERM, the trigger cancelled) saves the exact position as it stops: that path is
    test_trigger.py's take-over tests, in one process."""

    from airflow_tfjob.triggers.positions import TAKE_OVER as RESUME_MARKER
    from airflow_tfjob.triggers.positions import entry_key

    env = dict(airflow_env)
    env["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"]
    release = tmp_path / "release"
    async with Api(Path(local_cluster.kubeconfig_path)) as api:
        task_id, dag_id = "restarted", RESTART_DAG_ID
        ns, name, logs = await _defer_a_job(api, env, dag_id, task_id, "rst", "counted", COUNTING, release)

        def trigger_log() -> str:
            return "".join(p.read_text() for p in sorted((logs / f"task_id={task_id}").glob("*.trigger.*.log")))

        async def saved(final: bool) -> dict[str, Any] | None:
            entry = (await api.saved_positions(ns)).get(entry_key("tfjobs", name))
            if entry is None or entry["final"] is not final:
                return None
            cursor = entry["cursors"].get("worker-0") or {}
            return entry if cursor.get("ts") else None

        log_path = tmp_path / "triggerer.log"
        triggerer = start_triggerer(env, log_path)
        try:
            await wait_until(lambda: "counted line 7" in trigger_log(), timeout=120, interval=0.5)
            assert RESUME_MARKER not in trigger_log()
            await wait_until(lambda: saved(final=False), timeout=30, interval=0.3)
            kill_triggerer(triggerer)
        finally:
            kill_triggerer(triggerer)
        assert await api.get(ns, name) is not None, "a triggerer restart must not delete the job"

        triggerer = start_triggerer(env, log_path)
        try:
            await wait_until(lambda: RESUME_MARKER in trigger_log(), timeout=120, interval=0.5)
            release.write_text("go")

            async def resumed() -> bool:
                ti = (await asyncio.to_thread(_states, env, dag_id))[task_id]
                return bool(ti["state"] == "scheduled" and ti["next_kwargs"])

            await wait_until(resumed, timeout=120, interval=1.0)
            # The ended follow's entry goes with its book's next save.
            await wait_until(
                lambda: _absent(api, ns, entry_key("tfjobs", name)), timeout=30, interval=0.5
            )
        finally:
            stop_triggerer(triggerer)
        event = (await asyncio.to_thread(_states, env, dag_id))[task_id]["next_kwargs"]["event"]
        assert event["event"] == "succeeded", event
        text = trigger_log()
        assert text.count(RESUME_MARKER) == 1
        marker = next(line for line in text.splitlines() if RESUME_MARKER in line)
        assert "last saved its position" in marker, marker
        for i in range(8):
            assert text.count(f"counted line {i}") == 1, f"line {i}: once, neither lost nor repeated"
        assert text.count("counted final") == 1
        assert text.index("counted final") > text.index(RESUME_MARKER)


# A replica's start-up: its backlog in one write (a framework's banner), then the end when told.
START_UP = r"""
import os, sys, time
sys.stdout.write("".join(f"start-up line {i}\n" for i in range(40)))
sys.stdout.flush()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.1)
print("counted final", flush=True)
"""


async def test_a_triggerer_killed_half_a_second_after_its_first_lines_repeats_only_counted_lines(
    airflow_env: dict[str, str], local_cluster: Any, k8s_conn: str, tmp_path: Path
) -> None:
    """Issue 39's timing with a real triggerer and local task logs: SIGKILLed 0.5 s after its trigger's
    first replica lines (a 40-line start-up) are in the task's log file, before any periodic save could
    have covered them. The follow's first lines started a save at once (sent SETTLE = 0.5 s after
    they were written), so the kill lands just after it or just before it: either the successor resumes
    from that save and repeats no start-up line, or it found none and repeats them, counted. Whichever
    happened, every line it repeats is counted in its take-over note, and none is lost."""
    import re
    import time

    from airflow_tfjob.triggers.positions import REPEAT_BOUND, entry_key
    from airflow_tfjob.triggers.positions import TAKE_OVER as RESUME_MARKER

    env = dict(airflow_env)
    env["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"]
    release = tmp_path / "release"
    task_id, dag_id = "restarted", FIRST_LINES_DAG_ID
    async with Api(Path(local_cluster.kubeconfig_path)) as api:
        ns, name, logs = await _defer_a_job(api, env, dag_id, task_id, "first", "startup", START_UP, release)

        def trigger_logs() -> list[str]:
            return [p.read_text() for p in sorted((logs / f"task_id={task_id}").glob("*.trigger.*.log"))]

        async def saved() -> dict[str, Any] | None:
            entry = (await api.saved_positions(ns)).get(entry_key("tfjobs", name))
            return entry if entry and (entry["cursors"].get("worker-0") or {}).get("ts") else None

        log_path = tmp_path / "triggerer.log"
        triggerer = start_triggerer(env, log_path)
        try:
            await wait_until(lambda: "start-up line 0" in "".join(trigger_logs()), timeout=120, interval=0.02)
            shown = time.monotonic()
            await asyncio.sleep(0.5)
            kill_triggerer(triggerer)
            killed_after = time.monotonic() - shown
        finally:
            kill_triggerer(triggerer)
        await asyncio.sleep(0.5)  # a request sent just before the kill lands now, or never
        entry = await saved()
        (first_part,) = trigger_logs()

        triggerer = start_triggerer(env, log_path)
        try:
            await wait_until(lambda: RESUME_MARKER in "".join(trigger_logs()), timeout=120, interval=0.5)
            if entry is not None:  # the final line comes once the repeat window has passed
                await asyncio.sleep(max(0.0, entry["saved_at"] + REPEAT_BOUND - time.time()) + 0.3)
            release.write_text("go")

            async def resumed() -> bool:
                ti = (await asyncio.to_thread(_states, env, dag_id))[task_id]
                return bool(ti["state"] == "scheduled" and ti["next_kwargs"])

            await wait_until(resumed, timeout=120, interval=1.0)
        finally:
            stop_triggerer(triggerer)
        event = (await asyncio.to_thread(_states, env, dag_id))[task_id]["next_kwargs"]["event"]
        assert event["event"] == "succeeded", event

    successor = "".join(part for part in trigger_logs() if part != first_part)
    marker = next(line for line in successor.splitlines() if RESUME_MARKER in line)
    # The files hold one JSON record per log call: a record's lines are joined by an escaped newline.
    first = [int(n) for n in re.findall(r"\[worker-0\] start-up line (\d+)", first_part)]
    again = [int(n) for n in re.findall(r"\[worker-0\] start-up line (\d+)", successor)]
    assert sorted(set(first) | set(again)) == list(range(40)), "a start-up line lost"
    notes = re.findall(r"--- take-over: the (\d+) lines? above", successor)
    assert [int(n) for n in notes] == ([len(again)] if again else []), (marker, notes, again)
    if entry is not None:
        assert "last saved its position" in marker, marker
        # What the save covered is a prefix of the start-up: only lines after it may come again.
        assert again == list(range(40 - len(again), 40)), again
    else:
        assert "saved no position" in marker and "are counted" in marker, marker
    assert "".join(trigger_logs()).count("counted final") == 1
    print(
        f"\nreal triggerer SIGKILLed {killed_after:.2f} s after its first lines were in the log file: "
        f"first save {'landed before the kill' if entry is not None else 'not sent'}; the successor repeated "
        f"{len(again)} of the 40 start-up lines, counted {notes[0] if notes else 0} in its note"
    )


async def _absent(api: Api, ns: str, entry: str) -> bool:
    return entry not in await api.saved_positions(ns)


async def test_operator_deferred_to_a_real_triggerer_resumes_and_succeeds(
    airflow_env: dict[str, str], local_cluster: Any, k8s_conn: str, tmp_path: Path
) -> None:
    """The whole deferral: TFJobOperator.execute defers (its own trigger, as serialized into the Trigger
    row), a real triggerer follows the job to success, and a fresh operator instance, as a worker would
    run it, resumes with the event the triggerer stored and returns the job's result."""
    from airflow_compat import TaskDeferred
    from operator_support import TaskInstance, context_for, replica_command, wait_for

    from airflow_tfjob.hooks.kubeflow_job import KubeflowJobHook
    from airflow_tfjob.operators.tfjob import TFJobOperator

    release = tmp_path / "release"
    script = "import os, time\nwhile not os.path.exists(os.environ['RELEASE']): time.sleep(0.1)\n"
    params: dict[str, Any] = {
        "task_id": "train",
        "image": "local/python",
        "worker": 2,
        "command": ["python", "-c", script + "exec(open(os.environ['PROGRAM']).read())"],
        "env": {"RELEASE": str(release), "PROGRAM": str(tmp_path / "program.py")},
        "metrics": ["accuracy"],
        "clean_pod_policy": "All",
        "deferrable": True,
    }
    (tmp_path / "program.py").write_text(replica_command()[2])
    ti = TaskInstance(dag_id=OPERATOR_DAG_ID, task_id="train")
    with pytest.raises(TaskDeferred) as deferred:
        TFJobOperator(**params).execute(context_for(ti))
    assert deferred.value.method_name == "execute_complete"
    _, kwargs = deferred.value.trigger.serialize()
    name = kwargs["name"]

    env = dict(airflow_env)
    env["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"]
    specs = {"train": json.loads(json.dumps(kwargs))}
    await asyncio.to_thread(_orm, env, "defer", OPERATOR_DAG_ID, json.dumps(specs))
    triggerer = start_triggerer(env, tmp_path / "triggerer.log")
    try:

        async def assigned() -> bool:
            return bool((await asyncio.to_thread(_states, env, OPERATOR_DAG_ID))["train"]["triggerer_id"])

        await wait_until(assigned, timeout=90, interval=1.0)
        release.write_text("go")  # the job finishes while its task is deferred

        async def resumed() -> bool:
            state = (await asyncio.to_thread(_states, env, OPERATOR_DAG_ID))["train"]
            return bool(state["state"] == "scheduled" and state["next_kwargs"])

        await wait_until(resumed, timeout=120, interval=1.0)
    finally:
        stop_triggerer(triggerer)
    event = (await asyncio.to_thread(_states, env, OPERATOR_DAG_ID))["train"]["next_kwargs"]["event"]
    assert event["event"] == "succeeded", event

    result = await asyncio.to_thread(TFJobOperator(**params).execute_complete, context_for(ti), event)
    assert result["state"] == "succeeded" and result["name"] == name
    assert float(result["metrics"]["accuracy"]) == 0.875
    assert ti.xcoms["metrics"] == result["metrics"]
    hook = KubeflowJobHook(conn_id=k8s_conn)
    # cleanPodPolicy All, applied by the resumed task once the logs were drained.
    wait_for(lambda: not hook.list_job_pods(name, "default"), 30, "pods deleted by the resumed task")
    hook.delete_job("TFJob", name, "default")
