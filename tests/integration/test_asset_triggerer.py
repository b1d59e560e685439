"""An AssetWatcher on KubeflowJobSucceededTrigger under a real `airflow triggerer` with a real (SQLite)
metadata DB: a DAG scheduled on the asset is parsed (which registers the watcher's trigger), the
triggerer runs the trigger, a TFJob is created through the Kubernetes client (as kubectl would), and
the asset gets exactly one AssetEvent whose extra carries the job and its metrics. The triggerer is then
stopped and started again: the job is not emitted twice, and a job that succeeded while no triggerer
ran is emitted once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_asset_trigger import labelled, succeeded
from triggerer_support import airflow_home, start_triggerer, stop_triggerer
from watch_support import Api, unique, wait_until

# Migrating a fresh metadata DB and parsing the DAG take minutes on a loaded machine: the limit is generous.
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

ASSET = "digits-trained"
DAG_ID = "evaluate_digits"

DAG_FILE = """
import datetime
from airflow.sdk import DAG, Asset, AssetWatcher
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow_tfjob.triggers.assets import KubeflowJobSucceededTrigger

trained = Asset(
    "{asset}",
    watchers=[
        AssetWatcher(
            name="digits-jobs",
            trigger=KubeflowJobSucceededTrigger(
                label_selector="model=digits", namespace="{ns}", kind="TFJob", metrics=["accuracy", "loss"]
            ),
        )
    ],
)

with DAG("{dag_id}", schedule=[trained], start_date=datetime.datetime(2025, 1, 1)):
    EmptyOperator(task_id="evaluate")
"""


@pytest.fixture(scope="module")
def namespace() -> str:
    return unique("asset-dag")


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory: pytest.TempPathFactory, namespace: str) -> Iterator[dict[str, str]]:
    dag_file = DAG_FILE.format(asset=ASSET, ns=namespace, dag_id=DAG_ID)
    # An asset's watchers run for active DAGs only.
    home = tmp_path_factory.mktemp("airflow-home-assets")
    yield airflow_home(home, dag_file, AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False")


def _db(env: dict[str, str]) -> dict[str, Any]:
    """The asset's events and the triggers, read from the metadata DB itself (read-only, no Airflow
    import: a subprocess per look was most of this test's time on a loaded machine)."""
    path = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
        events = db.execute(
            "SELECT e.extra FROM asset_event e JOIN asset a ON e.asset_id = a.id WHERE a.name = ? ORDER BY e.id",
            (ASSET,),
        ).fetchall()
        triggers = db.execute("SELECT classpath, triggerer_id FROM trigger").fetchall()
    return {
        "events": [json.loads(extra) for (extra,) in events],
        "triggers": [classpath for classpath, _ in triggers],
        "assigned": [triggerer for _, triggerer in triggers],
    }


async def test_a_job_created_with_kubectl_gives_one_asset_event_and_a_restarted_triggerer_none_again(
    airflow_env: dict[str, str], local_cluster: Any, k8s_conn: str, namespace: str, tmp_path: Path
) -> None:
    env = dict(airflow_env)
    env["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"]
    log_path = tmp_path / "triggerer.log"
    registered = await asyncio.to_thread(_db, env)
    assert registered["triggers"] == ["airflow_tfjob.triggers.assets.KubeflowJobSucceededTrigger"], registered

    async def assigned() -> bool:
        return all((await asyncio.to_thread(_db, env))["assigned"])

    async def events(count: int) -> list[dict[str, Any]]:
        async def enough() -> bool:
            return len((await asyncio.to_thread(_db, env))["events"]) >= count

        await wait_until(enough, timeout=240, interval=0.5)
        found: list[dict[str, Any]] = (await asyncio.to_thread(_db, env))["events"]
        return found

    async with Api(Path(local_cluster.kubeconfig_path)) as api:
        await api.namespace(namespace)
        triggerer = start_triggerer(env, log_path)
        try:
            await wait_until(assigned, timeout=240, interval=0.5)
            trained = unique("trained")
            await api.create(namespace, labelled(trained, {"model": "digits"}))
            (event,) = await events(1)
            assert event["from_trigger"] is True
            payload = event["payload"]
            assert (payload["name"], payload["namespace"], payload["kind"]) == (trained, namespace, "TFJob")
            assert payload["metrics"] == {"accuracy": 0.93, "loss": 0.21}
        finally:
            await asyncio.to_thread(stop_triggerer, triggerer)

        # While no triggerer runs, another job succeeds; a new triggerer emits it, and not the first again.
        later = unique("later")
        await api.create(namespace, labelled(later, {"model": "digits"}))
        await wait_until(lambda: succeeded(api, namespace, later), timeout=60)
        triggerer = start_triggerer(env, log_path)
        try:
            found = await events(2)
            assert [e["payload"]["name"] for e in found] == [trained, later]
            # A third job after the restart: had the restarted trigger emitted the first again, that
            # event would have come before this one's.
            latest = unique("latest")
            await api.create(namespace, labelled(latest, {"model": "digits"}))
            found = await events(3)
            assert [e["payload"]["name"] for e in found] == [trained, later, latest]
        finally:
            await asyncio.to_thread(stop_triggerer, triggerer)
