"""The DAG tests' Airflow commands forked from a warm interpreter (tests/warm_airflow.py) are the commands:
each in a session of its own with the caller's environment, working directory and argv, its streams and
exit status as a new process's, stopped by a signal to its group, and a zygote closed while one of its
commands runs lets that command finish."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
import warm_airflow
from airflow_database import migrate
from operator_support import wait_for

AIRFLOW = str(Path(sys.executable).with_name("airflow"))

# Its one task writes what the command's process is (pid, parent, session, argv, cwd, a variable) to
# REPORT, then waits while the file HOLD is there.
DAG_FILE = """
import json, os, sys, time
import pendulum
from airflow.sdk import DAG, task

with DAG("warm_probe", start_date=pendulum.datetime(2025, 1, 1), schedule=None):
    @task
    def probe():
        with open(os.environ["REPORT"], "w") as out:
            json.dump({"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0), "argv": sys.argv,
                       "cwd": os.getcwd(),
                       "current_test": os.environ.get("PYTEST_CURRENT_TEST")}, out)
        while os.path.exists(os.environ["HOLD"]):
            time.sleep(0.05)
    probe()
"""


def home_env(home: Path) -> dict[str, str]:
    dags = home / "dags"
    dags.mkdir(parents=True)
    (dags / "warm_probe.py").write_text(DAG_FILE)
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "REPORT": str(home / "report.json"),
        "HOLD": str(home / "hold"),  # the task waits while this file is there
        "PYTHONFAULTHANDLER": "1",
    }
    migrate(env)
    return env


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One home for the module's tests (one zygote between them)."""
    return home_env(tmp_path_factory.mktemp("warm") / "home")


def test_a_warm_command_is_the_command_a_new_process_would_be(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TFJOB_TEST_COLD_AIRFLOW", raising=False)
    runs = []
    for index in range(2):
        # A variable that differs from command to command without a new zygote: the child has the caller's.
        proc = warm_airflow.popen([AIRFLOW, "dags", "test", "warm_probe"],
                                  {**env, "PYTEST_CURRENT_TEST": f"run {index}"}, cwd=str(tmp_path))  # fmt: skip
        out, err = proc.communicate(timeout=240)
        assert isinstance(proc, warm_airflow.WarmProcess)
        assert proc.returncode == 0, (out + err)[-3000:]
        assert "success" in out + err, (out + err)[-3000:]
        report = json.loads(Path(env["REPORT"]).read_text())
        # Its own process and session, the command's argv, the caller's directory and variables.
        assert report["pid"] == proc.pid and report["sid"] == proc.pid, report
        assert report["argv"][1:] == ["dags", "test", "warm_probe"], report
        assert report["cwd"] == str(tmp_path)
        assert report["current_test"] == f"run {index}"
        runs.append(report)
    # Both are children of one zygote, not of this process.
    assert runs[0]["pid"] != runs[1]["pid"] and runs[0]["ppid"] == runs[1]["ppid"] != os.getpid()


def test_a_failing_command_exits_and_reports_as_a_new_process_does(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    said = {}
    for cold in ("1", ""):
        monkeypatch.setenv("TFJOB_TEST_COLD_AIRFLOW", cold)
        proc = warm_airflow.popen([AIRFLOW, "dags", "test", "no_such_dag"], env)
        _, err = proc.communicate(timeout=240)
        said[cold] = (proc.returncode, err.strip().splitlines()[-1])
    assert said[""] == said["1"], said
    assert said[""][0] == 1 and "no_such_dag" in said[""][1], said


def test_sigabrt_to_the_group_prints_every_threads_stack_and_ends_the_command(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What run_cli does to a command past its bound (tests/dags/airflow_cli.py).
    monkeypatch.delenv("TFJOB_TEST_COLD_AIRFLOW", raising=False)
    hold, report = Path(env["HOLD"]), Path(env["REPORT"])
    report.unlink(missing_ok=True)
    hold.touch()
    proc = warm_airflow.popen([AIRFLOW, "dags", "test", "warm_probe"], env)
    assert isinstance(proc, warm_airflow.WarmProcess)
    wait_for(report.exists, 120, "the task to start", interval=0.05)
    os.killpg(proc.pid, signal.SIGABRT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGABRT
    assert "Fatal Python error: Aborted" in err and "Current thread" in err, err[-3000:]
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)
    hold.unlink()


def test_a_closed_zygote_lets_its_running_command_finish(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TFJOB_TEST_COLD_AIRFLOW", raising=False)
    monkeypatch.setattr(warm_airflow, "MAX_ZYGOTES", 1)
    hold, report = Path(env["HOLD"]), Path(env["REPORT"])
    report.unlink(missing_ok=True)
    hold.touch()
    running = warm_airflow.popen([AIRFLOW, "dags", "test", "warm_probe"], env)
    wait_for(report.exists, 120, "the first command's task to start", interval=0.05)
    zygote = warm_airflow._zygotes[warm_airflow._key(str(Path(AIRFLOW).parent / "python"), env)]
    # Another home's command: a second zygote, and the first (over MAX_ZYGOTES) is closed.
    other_env = home_env(tmp_path / "other")
    other = warm_airflow.popen([AIRFLOW, "dags", "test", "warm_probe"], other_env)
    out, err = other.communicate(timeout=240)
    assert other.returncode == 0, (out + err)[-3000:]
    assert zygote in warm_airflow._closed and zygote not in warm_airflow._zygotes.values()
    assert running.poll() is None  # still running, its zygote waiting for it
    hold.unlink()
    out, err = running.communicate(timeout=240)
    assert running.returncode == 0, (out + err)[-3000:]
    zygote.proc.wait(timeout=30)  # the zygote left once its last command had
