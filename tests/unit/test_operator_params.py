"""Operator and sensor parameters that need no cluster: cheap import, templating, argument checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_tfjob.jobs.status import TARGET_CONDITIONS, JobState, JobStatus, condition_reached

HEAVY_PREFIXES = ("kubernetes", "kubernetes_asyncio", "airflow.providers.cncf.kubernetes.hooks")


MODULES = [
    f"airflow_tfjob.{package}.{kind}"
    for package in ("operators", "sensors")
    for kind in ("tfjob", "generic", "pytorchjob", "xgboostjob", "jaxjob", "paddlejob")
]


def test_import_does_not_load_kubernetes_clients() -> None:
    # One fresh interpreter imports the modules one after the other and records what each import
    # added: a module whose import chain reaches a client loads it whatever was imported before
    # (nothing before loads one), so this is as strict as a process per module, at a twelfth the cost.
    code = (
        "import json, sys\n"
        f"heavy = lambda: sorted(m for m in sys.modules if any(m == p or m.startswith(p + '.') for p in {HEAVY_PREFIXES!r}))\n"
        "found = {}\n"
        f"for module in {MODULES!r}:\n"
        "    __import__(module)\n"
        "    found[module] = heavy()\n"
        "print(json.dumps(found))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert list(loaded) == MODULES
    assert {module: names for module, names in loaded.items() if names} == {}, "importing these loaded clients"


def _operator_in_dag(tmp_path: Path, **kwargs: Any) -> Any:
    from airflow.sdk import DAG

    from airflow_tfjob.operators.tfjob import TFJobOperator

    with DAG("params_dag", schedule=None, template_searchpath=[str(tmp_path)]):
        return TFJobOperator(task_id="train", **kwargs)


def _render(op: Any) -> None:
    context: dict[str, Any] = {"ds": "2025-01-02", "params": {"epochs": 3}, "run_id": "manual__1"}
    op.render_template_fields(context)


def test_args_ending_in_yaml_stay_strings(tmp_path: Path) -> None:
    # A file with that name exists in the search path: it must still not be read as a template.
    (tmp_path / "conf.yaml").write_text("should: not be read\n")
    op = _operator_in_dag(
        tmp_path,
        image="python:3.11",
        args=["--config=conf.yaml", "conf.yaml", "--day={{ ds }}"],
        command=["python", "train.json"],
    )
    op.resolve_template_files()
    _render(op)
    assert op.args == ["--config=conf.yaml", "conf.yaml", "--day=2025-01-02"]
    assert op.command == ["python", "train.json"]


def test_tfjob_file_is_rendered_as_jinja_template(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        "apiVersion: kubeflow.org/v1\nkind: TFJob\nmetadata:\n  name: job-{{ params.epochs }}\n"
        "spec:\n  tfReplicaSpecs:\n    Worker:\n      replicas: 1\n"
    )
    op = _operator_in_dag(tmp_path, tfjob="job.yaml", args=["--config=conf.yaml"])
    op.resolve_template_files()
    _render(op)
    assert op.tfjob["metadata"]["name"] == "job-3"
    assert op.args == ["--config=conf.yaml"]


def test_tfjob_file_rendered_without_parse_time_resolution(tmp_path: Path) -> None:
    # Operators created outside a DAG file parse (e.g. in tests or mapped tasks) still load the file.
    (tmp_path / "job.yml").write_text("metadata:\n  name: day-{{ ds }}\n")
    op = _operator_in_dag(tmp_path, tfjob=str(tmp_path / "job.yml"))
    _render(op)
    assert op.tfjob == {"metadata": {"name": "day-2025-01-02"}}


def test_missing_tfjob_file_is_reported(tmp_path: Path) -> None:
    from airflow_tfjob.build.validation import JobValidationError

    op = _operator_in_dag(tmp_path, tfjob="missing.yaml")
    with pytest.raises(JobValidationError, match=r"template file 'missing.yaml' not found"):
        _render(op)


def test_inline_yaml_string_is_rendered(tmp_path: Path) -> None:
    op = _operator_in_dag(tmp_path, tfjob="metadata:\n  name: x-{{ params.epochs }}\n")
    _render(op)
    assert op.tfjob == "metadata:\n  name: x-3"


def test_only_tfjob_has_file_rendering_and_template_ext_is_declared(tmp_path: Path) -> None:
    from airflow_tfjob.operators.tfjob import TFJobOperator

    assert tuple(TFJobOperator.template_ext) == (".yaml", ".yml", ".json")
    assert "tfjob" in TFJobOperator.template_fields
    assert "args" in TFJobOperator.template_fields


@pytest.mark.parametrize(
    ("kwargs", "field", "fix"),
    [
        ({"on_finish_action": "delete_pod"}, "on_finish_action", "'keep', 'delete', 'delete_succeeded'"),
        ({"on_kill_action": "stop"}, "on_kill_action", "'delete', 'keep'"),
        (
            {"kill_grace_period": -1},
            "kill_grace_period",
            "None for the pods' own terminationGracePeriodSeconds",
        ),
        ({"kill_grace_period": 2.5}, "kill_grace_period", "0 to remove the pods at once"),
        ({"kill_grace_period": True}, "kill_grace_period", "e.g. 1"),
        ({"startup_timeout": 0}, "startup_timeout", "positive number of seconds, or None"),
        ({"startup_timeout": -5}, "startup_timeout", "positive number of seconds"),
        ({"startup_timeout": "10m"}, "startup_timeout", "positive number of seconds"),
        ({"startup_timeout": True}, "startup_timeout", "positive number of seconds"),
        ({"log_replicas": "workers"}, "log_replicas", "'<type>:<index>' such as 'worker:0'"),
        ({"log_replicas": "worker:x"}, "log_replicas", "comma-separated list"),
        ({"log_replicas": ","}, "log_replicas", "'all', 'master'"),
        ({"log_replicas": ["worker"]}, "log_replicas", "'chief,worker:0'"),
        ({"metrics": "loss"}, "metrics", "a list of names"),
        ({"metrics": ["val acc"]}, "metrics", "letters, digits"),
        ({"metrics": ["loss="]}, "metrics", "letters, digits"),
        ({"metrics": ["missing"]}, "metrics", "rename the metric"),
        ({"metrics": ["loss", "loss"]}, "metrics", "list each metric once"),
        ({"log_rate_per_replica": -1}, "log_rate_per_replica", "0 means no limit"),
        ({"log_rate_per_replica": 1.5}, "log_rate_per_replica", "lines per second"),
        ({"log_total_cap": "1M"}, "log_total_cap", "0 means no limit"),
        ({"get_logs": "yes"}, "get_logs", "True or False"),
        ({"deferrable": 1}, "deferrable", "True or False"),
        ({"kubernetes_conn_id": ""}, "kubernetes_conn_id", "kubernetes_default"),
        ({"tensorboard": True}, "tensorboard", "tensorboard_log_dir="),
        ({"tensorboard_log_dir": "/logs"}, "tensorboard", "tensorboard=True"),
        ({"tensorboard": {"log_dir": "/l", "service_type": "Ingress"}}, "tensorboard", "service_type"),
        ({"tensorboard": {"log_dir": "/l", "service_type": "ClusterIP"}}, "tensorboard", "url_template"),
        ({"tensorboard": {"log_dir": "/l", "colour": "red"}}, "tensorboard", "TensorBoardSpec"),
        ({"tensorboard": 3}, "tensorboard", "tensorboard=True with tensorboard_log_dir"),
        (
            {"tensorboard": True, "tensorboard_log_dir": "/l", "tensorboard_keep": "no"},
            "tensorboard_keep",
            "True",
        ),
    ],
)
def test_bad_operator_parameters_are_refused_at_parse_time(
    tmp_path: Path, kwargs: dict[str, Any], field: str, fix: str
) -> None:
    from airflow_tfjob.build.validation import JobValidationError

    with pytest.raises(JobValidationError) as raised:
        _operator_in_dag(tmp_path, image="x", **kwargs)
    assert raised.value.field == field
    assert fix in str(raised.value), str(raised.value)


def test_all_parameter_problems_are_reported_at_once(tmp_path: Path) -> None:
    from airflow_tfjob.build.validation import JobValidationError

    with pytest.raises(JobValidationError) as raised:
        _operator_in_dag(tmp_path, image="x", on_kill_action="stop", startup_timeout=0, metrics=["a b"])
    # In the order of the signature (the rows' order).
    assert [p.field for p in raised.value.problems] == ["metrics", "startup_timeout", "on_kill_action"]


def test_templated_log_replicas_is_checked_once_rendered(tmp_path: Path) -> None:
    from airflow_tfjob.build.validation import JobValidationError
    from airflow_tfjob.operators.checks import check_operator_parameters
    from airflow_tfjob.operators.trainjob_params import every_rule

    op = _operator_in_dag(tmp_path, image="x", log_replicas="{{ params.which }}")
    op.render_template_fields({"params": {"which": "everyone"}})
    with pytest.raises(JobValidationError, match="log_replicas"):
        check_operator_parameters(op._own_parameters(), every_rule())


def test_tensorboard_parameters_build_one_spec(tmp_path: Path) -> None:
    from airflow_tfjob.integrations.links import TensorBoardLink
    from airflow_tfjob.operators.checks import tensorboard_spec

    assert tensorboard_spec(None) is None and tensorboard_spec(False) is None
    spec = tensorboard_spec(True, "/logs", True)
    assert spec is not None and (spec.log_dir, spec.keep, spec.service_type) == (
        "/logs",
        True,
        "LoadBalancer",
    )
    spec = tensorboard_spec(
        {"log_dir": "/a", "service_type": "ClusterIP", "url_template": "http://x/{service}/"}, "/b"
    )
    assert spec is not None and (spec.log_dir, spec.keep, spec.service_type) == ("/b", False, "ClusterIP")
    op = _operator_in_dag(tmp_path, image="x", tensorboard=True, tensorboard_log_dir="/logs/{{ run_id }}")
    assert any(isinstance(link, TensorBoardLink) for link in op.operator_extra_links)
    _render(op)
    assert op.tensorboard_log_dir == "/logs/manual__1"


def test_defaults(tmp_path: Path) -> None:
    op = _operator_in_dag(tmp_path, image="x")
    assert (op.on_finish_action, op.on_kill_action, op.render_only, op.get_logs) == (
        "keep",
        "delete",
        False,
        True,
    )
    assert op.startup_timeout == 600.0
    assert op.kill_grace_period == 1  # a kill stops the job within seconds, not after 30 s of grace
    assert op.deferrable is False
    assert op.kubernetes_conn_id == "kubernetes_default"


def test_default_deferrable_follows_airflow_config(monkeypatch: pytest.MonkeyPatch) -> None:
    code = "from airflow_tfjob.operators.tfjob import TFJobOperator as O; print(O(task_id='t', image='x').deferrable)"
    env = {**__import__("os").environ, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.stdout.strip().splitlines()[-1] == "True", out.stderr


def _status(state: JobState) -> JobStatus:
    return JobStatus(state=state)


@pytest.mark.parametrize(
    ("target", "reached"),
    [
        ("Succeeded", {JobState.SUCCEEDED}),
        ("Running", {JobState.RUNNING, JobState.RESTARTING, JobState.SUCCEEDED}),
        ("Created", set(JobState)),
    ],
)
def test_sensor_condition_table(target: str, reached: set[JobState]) -> None:
    assert target in TARGET_CONDITIONS
    for state in JobState:
        assert condition_reached(_status(state), target) is (state in reached), (target, state)


def test_no_parameter_shadows_a_base_operator_attribute() -> None:
    # `queue` and `resources` would silently re-route the task or break DAG serialization.
    import inspect

    from airflow.sdk import BaseOperator

    from airflow_tfjob.operators.tfjob import TFJobOperator

    base_params = set(inspect.signature(BaseOperator.__init__).parameters)
    ours = set(inspect.signature(TFJobOperator.__init__).parameters) - base_params
    assert ours & (base_params | set(dir(BaseOperator))) == set()
    assert set(TFJobOperator.template_fields) & (base_params | set(dir(BaseOperator))) == set()


def test_dag_with_the_operator_serializes(tmp_path: Path) -> None:
    from airflow.sdk import DAG
    from airflow_compat import dag_serialization

    DagSerialization = dag_serialization()

    from airflow_tfjob.operators.tfjob import TFJobOperator
    from airflow_tfjob.sensors.tfjob import TFJobSensor

    with DAG("serialize_me", schedule=None) as dag:
        TFJobOperator(
            task_id="train",
            worker=2,
            image="x",
            container_resources={"cpu": "1"},
            kueue_queue="q",
            tensorboard=True,
            tensorboard_log_dir="/logs",
        )
        TFJobSensor(task_id="wait", name="job")
    data = DagSerialization.to_dict(dag)
    assert data["dag"]["dag_id"] == "serialize_me"
    # The UI reads each link's URL from the XCom the operator pushes under its key.
    train = next(t for t in data["dag"]["tasks"] if t["__var"]["task_id"] == "train")["__var"]
    assert train["_operator_extra_links"] == {
        "TensorBoard": "tensorboard_url",
        "Logs worker-0": "replica_logs_url_worker-0",
        "Logs worker-1": "replica_logs_url_worker-1",
    }


def test_tensorboard_link_without_a_board_reads_no_xcom() -> None:
    """Airflow evaluates every extra link when a task ends: without a board the link must be empty
    without asking for the XCom (a lookup would log a 404 error in every task's log; outside a task
    runner, as here, it would raise)."""
    from airflow_tfjob.integrations.links import TensorBoardLink
    from airflow_tfjob.operators.tfjob import TFJobOperator

    op = TFJobOperator(task_id="no_board", image="x", worker=2)
    assert TensorBoardLink().get_link(op, ti_key=None) == ""  # type: ignore[arg-type]


def test_the_parameter_table_and_the_signature_cannot_drift() -> None:
    # Parameters are declared once (operators/params.py); everything else derives from that table.
    import inspect

    from airflow_tfjob.build.manifest import PARAMETER_NAMES
    from airflow_tfjob.build.paramtypes import PARAMETER_TYPES
    from airflow_tfjob.hooks.connection import CONNECTION_PARAMS
    from airflow_tfjob.operators import params
    from airflow_tfjob.operators.tfjob import TFJobOperator

    signature = inspect.signature(TFJobOperator.__init__).parameters.values()
    keyword_only = [p.name for p in signature if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert keyword_only == list(params.NAMES)
    assert len(set(params.NAMES)) == len(params.NAMES)
    assert tuple(TFJobOperator.template_fields) == params.TEMPLATE_FIELDS
    assert set(TFJobOperator.template_fields_renderers) <= set(params.TEMPLATE_FIELDS)
    # Each manifest parameter reaches build_tfjob under a name it takes, and has a type check.
    to_manifest = [*params.MANIFEST_PARAMS, *params.RENAMED.values()]
    assert set(to_manifest) <= set(PARAMETER_NAMES)
    assert set(params.TYPED) <= set(PARAMETER_TYPES)
    assert set(CONNECTION_PARAMS) <= set(params.NAMES)
    # The signature writes out the rows' defaults, and every parameter is stored (`metrics` as a list).
    written = {p.name: p.default for p in signature if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert written == params.TFJOB_PARAMETERS.defaults
    op = TFJobOperator(task_id="drift")
    assert {name: getattr(op, name) for name in params.NAMES} == {**written, "metrics": []}


def test_every_follow_and_own_parameter_has_its_rule_and_its_field() -> None:
    from dataclasses import fields

    from airflow_tfjob.follow.outcome import FollowOptions
    from airflow_tfjob.integrations.parts import PARTS
    from airflow_tfjob.operators import params

    rows = params.GENERIC.rows
    assert [row.name for row in rows if row.role in ("follow", "own") and row.check is None] == []
    # A follow row is an option of the core or of one registered part (its options_type).
    option_fields = {f.name for f in fields(FollowOptions)} - {"parts"}
    option_fields |= {f.name for p in PARTS if p.options_type is not None for f in fields(p.options_type)}
    assert [row.field for row in params.GENERIC.follow if row.field not in option_fields] == []
    assert all(row.doc and "\n" not in row.doc for row in rows), "every row has its one docs line"
