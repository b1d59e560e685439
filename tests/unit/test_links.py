"""The tasks' links: one "Logs <replica>" per replica counted at parse, URLs from the connection's
template or dashboard, pushed for the submitted job's replicas, and never a failure or a 404 when absent."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from airflow_tfjob.integrations import links
from airflow_tfjob.jobs.kinds import PYTORCHJOB, TFJOB
from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator
from airflow_tfjob.operators.tfjob import TFJobOperator

TEMPLATE = "https://logs.example/{namespace}/{pod}?c={container}&j={job}&r={replica}"


@pytest.fixture
def connection(monkeypatch: pytest.MonkeyPatch) -> Any:
    def set_extra(**extra: str) -> None:
        monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra}))

    return set_extra


def names(op: Any) -> list[str]:
    return [link.name for link in op.operator_extra_links]


def test_one_logs_link_per_replica_counted_at_parse() -> None:
    op = TFJobOperator(task_id="t", image="i", chief=1, worker=2)
    assert names(op) == ["TensorBoard", "Logs chief-0", "Logs worker-0", "Logs worker-1"]
    keys = [link.xcom_key for link in op.operator_extra_links]
    assert keys[1:] == ["replica_logs_url_chief-0", "replica_logs_url_worker-0", "replica_logs_url_worker-1"]


def test_kind_types_and_templated_counts() -> None:
    op = PyTorchJobOperator(task_id="t", image="i", replicas={"master": 1, "worker": 2})
    assert names(op) == ["TensorBoard", "Logs master-0", "Logs worker-0", "Logs worker-1"]
    templated = TFJobOperator(task_id="t", image="i", replicas="{{ params.replicas }}")
    assert names(templated) == ["TensorBoard"]


def test_the_serialised_dag_keeps_every_link() -> None:
    from airflow.sdk import DAG
    from airflow_compat import dag_serialization

    DagSerialization = dag_serialization()

    with DAG("links", schedule=None) as dag:
        TFJobOperator(task_id="t", image="i", worker=2)
    task = DagSerialization.from_dict(DagSerialization.to_dict(dag)).get_task("t")
    assert sorted(task.extra_links) == ["Logs worker-0", "Logs worker-1", "TensorBoard"]


def test_template_from_the_connection(connection: Any) -> None:
    connection(logs_url_template=TEMPLATE)
    template = links.logs_url_template("kubernetes_default")
    url = links.replica_log_url(template, "job", "ns", "worker-1", "tensorflow")
    assert url == "https://logs.example/ns/job-worker-1?c=tensorflow&j=job&r=worker-1"


def test_dashboard_log_view(connection: Any) -> None:
    connection(dashboard_url="https://dash.example/")
    template = links.logs_url_template("kubernetes_default")
    assert links.replica_log_url(template, "job", "ns", "worker-0", "pytorch") == (
        "https://dash.example/#/log/ns/job-worker-0/pod?namespace=ns&container=pytorch"
    )


def test_no_template_no_url(connection: Any) -> None:
    connection()
    assert links.logs_url_template("kubernetes_default") is None
    assert links.replica_log_url(None, "job", "ns", "worker-0", "tensorflow") == ""


def test_no_connection_no_url() -> None:
    assert links.logs_url_template("no_such_connection") is None


def test_bad_template_names_the_fields() -> None:
    with pytest.raises(ValueError, match=r"logs_url_template.*\{namespace\}, \{pod\}"):
        links.check_template("https://x/{pod_name}")


def job(name: str = "j", **replicas: int) -> dict[str, Any]:
    specs = {rtype: {"replicas": count} for rtype, count in replicas.items()}
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"pytorchReplicaSpecs": specs}}


def test_pushed_for_every_replica_of_the_submitted_job(connection: Any) -> None:
    connection(logs_url_template="{pod}/{container}")
    pushed: dict[str, str] = {}
    links.push_links(PYTORCHJOB, job(Master=1, Worker=2), "kubernetes_default",
                             pushed.__setitem__, logging.getLogger("t"))
    assert pushed == {
        "replica_logs_url_master-0": "j-master-0/pytorch",
        "replica_logs_url_worker-0": "j-worker-0/pytorch",
        "replica_logs_url_worker-1": "j-worker-1/pytorch",
    }


def test_nothing_pushed_without_a_template(connection: Any) -> None:
    connection()
    pushed: dict[str, str] = {}
    links.push_links(PYTORCHJOB, job(Master=1), "kubernetes_default", pushed.__setitem__,
                             logging.getLogger("t"))
    assert pushed == {}


def test_a_bad_template_costs_the_links_not_the_task(connection: Any, caplog: pytest.LogCaptureFixture) -> None:
    connection(logs_url_template="{nope}")
    pushed: dict[str, str] = {}
    links.push_links(TFJOB, job(), "kubernetes_default", pushed.__setitem__, logging.getLogger("t"))
    assert pushed == {}
    assert "Replica log links are not available" in caplog.text


def test_get_link_rebuilds_the_pushed_url_from_the_followed_job(connection: Any) -> None:
    # What Airflow pushes again under the link's key when the task ends, also in a try resumed from
    # the triggerer (which knows the job from the trigger's event).
    connection(logs_url_template="{namespace}/{pod}/{container}")
    op = TFJobOperator(task_id="t", image="i", worker=1)
    link = op.operator_extra_links[1]
    ti_key: Any = None
    assert link.get_link(op, ti_key=ti_key) == ""  # nothing submitted: an empty link, no XCom read
    op._job_ref = ("j", "ns")
    assert link.get_link(op, ti_key=ti_key) == "ns/j-worker-0/tensorflow"


def test_get_link_never_raises(connection: Any) -> None:
    connection(logs_url_template="{nope}")
    op = TFJobOperator(task_id="t", image="i", worker=1)
    op._job_ref = ("j", "ns")
    ti_key: Any = None
    assert op.operator_extra_links[1].get_link(op, ti_key=ti_key) == ""


def test_a_board_gets_an_empty_link_first(connection: Any) -> None:
    # Replaced by the board's URL once it answers; a board that never does leaves an XCom, so the
    # end-of-task lookup of the TensorBoard link finds one instead of logging a 404.
    connection()
    pushed: dict[str, str] = {}
    links.push_links(TFJOB, job(), "kubernetes_default", pushed.__setitem__, logging.getLogger("t"),
                     tensorboard=True)
    assert pushed == {"tensorboard_url": ""}
