"""The provider's plugin: a deferred task a user marks failed or success before any triggerer started
its trigger still has its job deleted, by the listener the API server calls (airflow_tfjob.plugins.kill_listener).

The task instance is the API server's view of it (the state just set, the trigger row it points at);
the trigger row is Airflow's own model, its kwargs encrypted and decrypted as in the database. The
whole path, through a real API server with the triggerer stopped, is in tests/e2e.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import entry_points
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.models.trigger import Trigger
from watch_support import Api, tfjob_manifest, unique, wait_until

from airflow_tfjob.plugins.kill_listener import KubeflowJobPlugin, kill_unstarted_trigger
from airflow_tfjob.triggers.deferral import KubeflowJobConditionTrigger, KubeflowJobTrigger

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

SLEEPER = ["python", "-c", "import time; time.sleep(600)"]


def deferred_ti(trigger: Any, state: str = "failed") -> SimpleNamespace:
    """A task instance as the API server hands it to listeners once a user set its state."""
    classpath, kwargs = trigger.serialize()
    return SimpleNamespace(task_id="train", state=state, trigger_id=7, trigger=Trigger(classpath, kwargs))


@pytest.mark.parametrize("state", ["failed", "success"])
async def test_marking_a_deferred_task_deletes_its_job_and_pods(api: Api, k8s_conn: str, state: str) -> None:
    ns = await api.namespace(unique("p"))
    name = unique("mark")
    await api.create(ns, tfjob_manifest(name, external=False, command=SLEEPER))
    await wait_until(lambda: api.pods(ns, name), timeout=30)
    trigger = KubeflowJobTrigger(name=name, namespace=ns, kubernetes_conn_id=k8s_conn, kill_grace_period=1)

    thread = kill_unstarted_trigger(None, deferred_ti(trigger, state))
    assert thread is not None
    await asyncio.to_thread(thread.join, 60)
    assert await api.get(ns, name) is None
    await wait_until(lambda: _no_pods(api, ns, name), timeout=30)


async def _no_pods(api: Api, ns: str, name: str) -> bool:
    return not await api.pods(ns, name)


async def test_kept_when_the_task_said_so(api: Api, k8s_conn: str) -> None:
    ns = await api.namespace(unique("p"))
    name = unique("keep")
    await api.create(ns, tfjob_manifest(name))
    trigger = KubeflowJobTrigger(name=name, namespace=ns, kubernetes_conn_id=k8s_conn, delete_on_kill=False)
    thread = kill_unstarted_trigger(None, deferred_ti(trigger))
    assert thread is not None
    await asyncio.to_thread(thread.join, 60)
    assert await api.get(ns, name) is not None


def test_nothing_but_a_users_change_of_a_task_deferred_on_its_job() -> None:
    job = KubeflowJobTrigger(name="job", namespace="ns")
    # A task's own success or failure (the worker's listeners: previous_state RUNNING).
    assert kill_unstarted_trigger("running", deferred_ti(job)) is None
    # A task that is not deferred, and a sensor's trigger (the sensor owns no job).
    assert kill_unstarted_trigger(None, SimpleNamespace(trigger_id=None, state="failed")) is None
    sensor = KubeflowJobConditionTrigger(name="job", namespace="ns")
    assert kill_unstarted_trigger(None, deferred_ti(sensor)) is None


def test_airflow_finds_the_plugin_and_its_listener() -> None:
    from airflow.plugins_manager import is_valid_plugin

    found = {e.name: e.value for e in entry_points(group="airflow.plugins")}
    assert found.get("airflow_tfjob") == "airflow_tfjob.plugins.kill_listener:KubeflowJobPlugin", found
    assert is_valid_plugin(KubeflowJobPlugin) and KubeflowJobPlugin.listeners
