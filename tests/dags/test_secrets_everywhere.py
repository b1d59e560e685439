"""A secret in every structured parameter that can hold one (env, runtime patches, replica placement,
templates, decorator arguments), through a real `airflow dags test` run: absent from the task log, XCom and
the rendered fields Airflow stores for the UI (where Airflow's own redaction stops at a nesting depth of 5)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow_cli import airflow_db, dags_test, migrated_airflow_env

pytestmark = [pytest.mark.dags, pytest.mark.cluster, pytest.mark.timeout(420)]

DAGS = Path(__file__).parent / "secret_dags"
TOKEN, CALL_TOKEN = (
    "dags-test-everywhere-token-7731",
    "dags-test-everywhere-call-2208",
)  # secrets_everywhere.py


@pytest.fixture(scope="module")
def airflow_env(local_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("airflow-home")
    yield migrated_airflow_env(home, DAGS, local_cluster.kubeconfig_path, migrate_timeout=180)


def _stored(env: dict[str, str], query: str) -> str:
    with airflow_db(env) as db:
        return json.dumps(db.execute(query).fetchall(), default=str)


def test_a_secret_in_every_structured_parameter_never_shows(airflow_env: dict[str, str]) -> None:
    output = dags_test(airflow_env, "secrets_everywhere", timeout=360)
    states = _stored(
        airflow_env, "select task_id, state from task_instance where dag_id = 'secrets_everywhere'"
    )
    assert json.loads(states) and all(state == "success" for _, state in json.loads(states)), states
    assert TOKEN not in output and CALL_TOKEN not in output
    xcoms = _stored(airflow_env, "select value from xcom where dag_id = 'secrets_everywhere'")
    assert "tfReplicaSpecs" in xcoms and "TrainJob" in xcoms  # the rendered manifests were pushed...
    assert TOKEN not in xcoms and CALL_TOKEN not in xcoms  # ...hidden
    rendered = _stored(
        airflow_env,
        "select rendered_fields from rendered_task_instance_fields where dag_id = 'secrets_everywhere'",
    )
    for field in ("runtime_patches", "hyperparameters", "volumes", "op_args", "env"):
        assert field in rendered, field  # the fields were stored...
    assert "***" in rendered
    assert TOKEN not in rendered and CALL_TOKEN not in rendered  # ...hidden however deep
