"""The preflight against local clusters in each state a platform engineer meets: every part there; Trainer
without the TensorFlow runtime; the kubeflow.org/v1 API family off; Kueue on with the kind's integration
off; a Role missing ``delete pods``. Each through ``tfjob-preflight``'s main run as a new process would run
it (``--kind`` and ``--dag``: the table names the part and its fix, the exit status says whether the
DAG's jobs can run; in this process, tests/cli_support.py, where the command's own failures also run as
real processes)
and through a task (``preflight=True``, and the failure at submit time without it): one clear
AirflowException naming the part and the fix, never the client's exception. And the command's own
failures (no kubeconfig, a server down, a 403, a 404): one line each, no traceback.
"""

from __future__ import annotations

import http.server
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import run_main
from operator_support import TaskInstance, context_for, replica_command

import airflow_tfjob
from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.node.ports import host_ports
from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.preflight.cli import main
from airflow_tfjob.version_compat import AirflowException

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

PREFLIGHT = Path(sys.executable).parent / "tfjob-preflight"
ROLE = Path(airflow_tfjob.__file__).parent / "rbac" / "role.yaml"
USER = "airflow"
TRAINJOB_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_tfjob.operators.tfjob import TFJobOperator

with DAG("pf_trainjob", start_date=datetime(2026, 1, 1), schedule=None):
    TFJobOperator(task_id="train", image="python:3.12", command=["python", "-c", "print(1)"], worker=2,
                  api="trainjob", namespace="default")
"""
V1_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator

with DAG("pf_v1", start_date=datetime(2026, 1, 1), schedule=None):
    TFJobOperator(task_id="tf", image="python:3.12", command=["python", "-c", "print(1)"], api="tfjob",
                  namespace="default"{queue})
    PyTorchJobOperator(task_id="torch", image="python:3.12", command=["python", "-c", "print(1)"],
                       namespace="default")
"""


def preflight(*args: str) -> subprocess.CompletedProcess[str]:
    return run_main(main, args)


def preflight_process(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed command in a process of its own: the exit status a shell sees, what it prints."""
    return subprocess.run([str(PREFLIGHT), *args], capture_output=True, text=True, timeout=120)


def dag_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "pf_dag.py"
    path.write_text(text)
    return str(path)


def row(out: str, part: str) -> str:
    """The table's row of a part (its status, there, missing, fix)."""
    lines = [line for line in out.splitlines() if line.startswith(part)]
    assert lines, f"no row {part!r} in:\n{out}"
    return lines[0]


def use_connection(monkeypatch: pytest.MonkeyPatch, kubeconfig: Path) -> None:
    extra = {"kube_config_path": str(kubeconfig), "namespace": "default"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra})
    )


def failure_of(op: Any) -> AirflowException:
    """The task's failure: an AirflowException whose chain holds no client exception."""
    with pytest.raises(AirflowException) as raised:
        op.execute(context_for(TaskInstance()))
    error: BaseException | None = raised.value
    while error is not None:
        assert "ApiException" not in type(error).__name__, f"a client exception in the chain: {error!r}"
        error = error.__cause__ or error.__context__
    return raised.value


def tf_task(**kwargs: Any) -> TFJobOperator:
    params: dict[str, Any] = {
        "task_id": "train",
        "image": "local/python",
        "command": replica_command(),
        "namespace": "default",
        "startup_timeout": 60,
    }
    return TFJobOperator(**{**params, **kwargs})


# -- every part there ---------------------------------------------------------------------------------


def test_all_parts_present(local_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig = str(local_cluster.kubeconfig_path)
    done = preflight(
        "--kubeconfig",
        kubeconfig,
        "--dag",
        dag_file(tmp_path, V1_DAG.format(queue="")),
        "--kind",
        "TrainJob",
        "--runtime",
        "torch-distributed",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok" in row(done.stdout, "TFJob (kubeflow.org/v1)")
    assert "ok" in row(done.stdout, "PyTorchJob (kubeflow.org/v1)")
    assert "ok" in row(done.stdout, "ClusterTrainingRuntime torch-distributed")
    assert done.stdout.count("MISSING") == 1 and "Traceback" not in done.stderr  # the header only
    # The task checks first, says so, and runs its job.
    use_connection(monkeypatch, local_cluster.kubeconfig_path)
    op = tf_task(preflight=True, worker=1)
    result = op.execute(context_for(TaskInstance()))
    assert result["state"] == "succeeded"


# -- Trainer v2 without the TensorFlow runtime, and no kubeflow.org/v1 ----------------------------------


@pytest.fixture(scope="module")
def trainer_only() -> Iterator[LocalCluster]:
    """Trainer v2 only (the v1 API family off), the provider's TensorFlow runtimes not installed."""
    with LocalCluster(apis=["trainjob"], runner=False) as cluster:
        yield cluster


def test_no_tensorflow_runtime(
    trainer_only: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = preflight(
        "--kubeconfig", str(trainer_only.kubeconfig_path), "--dag", dag_file(tmp_path, TRAINJOB_DAG)
    )
    assert done.returncode == 1, done.stdout + done.stderr
    runtime = row(done.stdout, "ClusterTrainingRuntime tensorflow-distributed")
    assert "MISSING" in runtime and "tfjob-runtimes install" in runtime
    assert "ok" in row(done.stdout, "TrainJob (trainer.kubeflow.org/v1alpha1)")
    assert "ok" in row(done.stdout, "JobSet (jobset.x-k8s.io)")
    use_connection(monkeypatch, trainer_only.kubeconfig_path)
    # preflight=True: nothing is created, the table says what to do.
    error = failure_of(tf_task(api="trainjob", worker=2, preflight=True))
    assert "Preflight" in str(error) and "tfjob-runtimes install" in str(error)
    # Without it, the webhook's 403 is told as the missing runtime and its fix.
    error = failure_of(tf_task(api="trainjob", worker=2))
    message = str(error)
    assert "ClusterTrainingRuntime tensorflow-distributed" in message and "tfjob-runtimes install" in message
    assert "403" in message


def test_v1_api_family_off(
    trainer_only: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = preflight(
        "--kubeconfig",
        str(trainer_only.kubeconfig_path),
        "--dag",
        dag_file(tmp_path, V1_DAG.format(queue="")),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    for kind in ("TFJob", "PyTorchJob"):
        line = row(done.stdout, f"{kind} (kubeflow.org/v1)")
        assert "MISSING" in line and "training-operator" in line and "kubectl apply" in line
    use_connection(monkeypatch, trainer_only.kubeconfig_path)
    error = failure_of(
        PyTorchJobOperator(
            task_id="train",
            image="local/python",
            command=replica_command(),
            namespace="default",
            preflight=True,
        )
    )
    assert "PyTorchJob (kubeflow.org/v1)" in str(error) and "training-operator" in str(error)
    # Without preflight: the kind's 404 names the missing API and its install.
    error = failure_of(
        PyTorchJobOperator(
            task_id="train", image="local/python", command=replica_command(), namespace="default"
        )
    )
    assert (
        "404" in str(error) and "Kubeflow training-operator" in str(error) and "kubectl apply" in str(error)
    )


# -- Kueue on, the kind's integration off -----------------------------------------------------------------


def test_kueue_integration_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Kueue v0.19's shipped integrations: the kubeflow.org/v1 kinds are off.
    with LocalCluster(kueue=True, runner=False) as cluster:
        kubeconfig = str(cluster.kubeconfig_path)
        done = preflight(
            "--kubeconfig",
            kubeconfig,
            "--dag",
            dag_file(tmp_path, V1_DAG.format(queue=', kueue_queue="team-a"')),
        )
        assert done.returncode == 1, done.stdout + done.stderr
        assert "ok" in row(done.stdout, "Kueue ")
        line = row(done.stdout, "Kueue integration kubeflow.org/tfjob")
        assert "MISSING" in line and "integrations.frameworks" in line and "kubeflow.org/tfjob" in line
        # PyTorchJob's is off too, but that job asks for no queue: a warning, not a failure.
        assert "warning" in row(done.stdout, "Kueue integration kubeflow.org/pytorchjob")
        # Without a queue nothing stops the job.
        assert preflight("--kubeconfig", kubeconfig, "--kind", "TFJob").returncode == 0
        use_connection(monkeypatch, cluster.kubeconfig_path)
        error = failure_of(tf_task(worker=1, kueue_queue="team-a", preflight=True))
        assert "integrations.frameworks" in str(error) and "kubeflow.org/tfjob" in str(error)


# -- a Role without `delete pods` -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def narrow_roles(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """User `airflow`: the shipped Role less `delete pods`; user `nocreate`: less `create tfjobs`."""
    folder = tmp_path_factory.mktemp("roles")
    files = {}
    for user, (resource, verb) in {USER: ("pods", "delete"), "nocreate": ("tfjobs", "create")}.items():
        docs = list(yaml.safe_load_all(ROLE.read_text()))
        for rule in docs[0]["rules"]:
            if resource in rule["resources"]:
                rule["verbs"] = [v for v in rule["verbs"] if v != verb]
        files[user] = folder / f"{user}.yaml"
        files[user].write_text(yaml.safe_dump_all(docs))
    with LocalCluster(auth=True, roles={u: [p] for u, p in files.items()}, runner=False) as cluster:
        yield cluster


def test_role_missing_delete_pods(narrow_roles: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig = narrow_roles.kubeconfig_for(USER)
    done = preflight("--kubeconfig", str(kubeconfig), "--kind", "TFJob")
    assert done.returncode == 1, done.stdout + done.stderr
    line = row(done.stdout, "verb: delete pods")
    assert "MISSING" in line and "role.yaml" in line
    assert re.search(r"\d+ of \d+ verbs", done.stdout)
    use_connection(monkeypatch, kubeconfig)
    error = failure_of(tf_task(worker=1, preflight=True))
    assert "delete pods" in str(error) and "role.yaml" in str(error)


def test_denied_verb_at_submit(narrow_roles: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    use_connection(monkeypatch, narrow_roles.kubeconfig_for("nocreate"))
    error = failure_of(tf_task(worker=1))
    assert "403" in str(error) and "verb: create tfjobs" in str(error) and "role.yaml" in str(error)


# -- the command's own failures: one line each ----------------------------------------------------------


def one_line(done: subprocess.CompletedProcess[str], status: int, *words: str) -> None:
    assert done.returncode == status, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("tfjob-preflight:")]
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], lines[0]


def kubeconfig_to(path: Path, server: str) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    return path


@pytest.fixture
def answering(request: pytest.FixtureRequest) -> Iterator[str]:
    """An HTTP server answering every request with one status and a Kubernetes Status body."""
    status = request.param

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = json.dumps(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "code": status,
                    "message": f"refused by the front proxy ({status})",
                }
            ).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_no_kubeconfig(tmp_path: Path) -> None:
    absent = str(tmp_path / "absent")
    one_line(preflight_process("--kubeconfig", absent, "--kind", "TFJob"), 3, "no kubeconfig", "absent")
    one_line(preflight("--kubeconfig", absent, "--kind", "TFJob"), 3, "no kubeconfig", "absent")
    debug = preflight_process("--kubeconfig", absent, "--kind", "TFJob", "--debug")
    assert debug.returncode != 0 and "Traceback" in debug.stderr  # --debug shows where


def test_server_down(tmp_path: Path) -> None:
    port = host_ports().reserve()  # reserved and never bound: nothing listens there (node/ports.py)
    config = kubeconfig_to(tmp_path / "down", f"http://127.0.0.1:{port}")
    one_line(preflight("--kubeconfig", str(config), "--kind", "TFJob", "--timeout", "2"), 3, "cannot reach")


@pytest.mark.parametrize("answering", [403, 404], indirect=True)
def test_refusing_server(answering: str, tmp_path: Path) -> None:
    config = kubeconfig_to(tmp_path / "refusing", answering)
    done = preflight("--kubeconfig", str(config), "--kind", "TFJob", "--timeout", "2")
    one_line(done, 3, "refused by the front proxy")


def test_usage_errors() -> None:
    assert preflight_process().returncode == 2
    unknown = preflight_process("--kind", "MPIJob")
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
