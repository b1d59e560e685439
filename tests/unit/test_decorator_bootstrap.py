"""The @task.tfjob bootstrap, run for real in a child Python as a replica would run it."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap

import pytest

from airflow_tfjob.decorators.replica_function import (
    CALL_ENV,
    RETURN_MARKER,
    SOURCE_ENV,
    _with_env,
    decode_return,
    encode_call,
)
from airflow_tfjob.decorators.tfjob import BOOTSTRAP

SOURCE = textwrap.dedent(
    """
    def train(scale, *, offset=0):
        import json, os
        config = json.loads(os.environ.get("TF_CONFIG") or "{}")
        print("replica", config.get("task"), flush=True)
        return {"value": scale * 2 + offset, "task": config.get("task")}
    """
)


def _run(
    tf_config: dict | None, args: list, kwargs: dict, source: str = SOURCE
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env[SOURCE_ENV] = base64.b64encode(source.encode()).decode()
    env[CALL_ENV] = encode_call("train", args, kwargs)
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return subprocess.run(
        [sys.executable, "-c", BOOTSTRAP, "--ignored=1"], env=env, capture_output=True, text=True, timeout=60
    )


def _returned(stdout: str) -> list:
    return [
        decode_return(line.split(" ", 1)[1]) for line in stdout.splitlines() if line.startswith(RETURN_MARKER)
    ]


def _cluster(**types: int) -> dict:
    return {t: [f"127.0.0.1:{2000 + i}" for i in range(n)] for t, n in types.items()}


def test_single_process_without_tf_config_returns() -> None:
    done = _run(None, [3], {"offset": 1})
    assert done.returncode == 0, done.stderr
    assert _returned(done.stdout) == [{"value": 7, "task": None}]


@pytest.mark.parametrize(
    ("cluster", "task", "expected"),
    [
        (_cluster(worker=2), {"type": "worker", "index": 0}, True),
        (_cluster(worker=2), {"type": "worker", "index": 1}, False),
        (_cluster(chief=1, worker=2), {"type": "chief", "index": 0}, True),
        (_cluster(chief=1, worker=2), {"type": "worker", "index": 0}, False),
        (_cluster(chief=1, ps=1, worker=1), {"type": "ps", "index": 0}, False),
    ],
)
def test_only_the_master_replica_prints_the_value(cluster: dict, task: dict, expected: bool) -> None:
    done = _run({"cluster": cluster, "task": task}, [5], {})
    assert done.returncode == 0, done.stderr
    assert _returned(done.stdout) == ([{"value": 10, "task": task}] if expected else [])


def test_an_exception_fails_the_replica() -> None:
    source = "def train(x):\n    raise RuntimeError('boom ' + str(x))\n"
    done = _run(None, [1], {}, source=source)
    assert done.returncode == 1
    assert "RuntimeError: boom 1" in done.stderr
    assert RETURN_MARKER not in done.stdout


def test_arguments_must_be_json() -> None:
    from airflow_tfjob.build.validation import JobValidationError

    with pytest.raises(JobValidationError, match=r"op_args\[0\]: a object is not a plain JSON value"):
        encode_call("train", [object()], {})


def test_unreadable_payload_is_reported() -> None:
    from airflow_tfjob.version_compat import AirflowException

    with pytest.raises(AirflowException, match="unreadable return value"):
        decode_return("not base64 !!")


def test_env_is_merged_in_both_forms() -> None:
    assert _with_env({"A": "1", "X": "old"}, {"X": "new"}) == {"A": "1", "X": "new"}
    assert _with_env([{"name": "X", "value": "old"}, {"name": "A", "value": "1"}], {"X": "new"}) == [
        {"name": "A", "value": "1"},
        {"name": "X", "value": "new"},
    ]
    assert _with_env(None, {"X": "1"}) == {"X": "1"}
