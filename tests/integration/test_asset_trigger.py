"""KubeflowJobSucceededTrigger (the AssetWatcher's trigger) run as the triggerer runs it (``run()`` iterated in
a task of its own, cancelled to stop), against the local cluster with real replica processes.

Jobs are created through the Kubernetes client, as kubectl or the Kubeflow SDK would: nothing of the
provider's operators is involved. The triggerer itself (its DB rows, the AssetEvent it writes from the
payload, a restart of the process) is tests/integration/test_asset_triggerer.py.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from watch_support import Api, succeeded_status, tfjob_manifest, unique, wait_until

from airflow_tfjob.integrations import assets
from airflow_tfjob.triggers.assets import KubeflowJobSucceededTrigger

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

#: A training script that prints its metrics in Katib's format, then exits with the given code.
TRAIN = "import sys; print('epoch=1 accuracy=0.5 loss=0.9'); print('epoch=2 accuracy=0.93 loss=0.21'); sys.exit({code})"


def labelled(name: str, labels: dict[str, str], *, code: int = 0, external: bool = False) -> dict[str, Any]:
    command = [sys.executable, "-c", TRAIN.format(code=code)]
    job = tfjob_manifest(name, external=external, command=command)
    job["metadata"]["labels"] = labels
    return job


class Running:
    """A trigger run as the triggerer runs it: its events collected, cancelled to stop (a restart)."""

    def __init__(self, trigger: KubeflowJobSucceededTrigger) -> None:
        self.trigger = trigger
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        async for event in self.trigger.run():
            json.dumps(event.payload)  # it travels through the metadata DB
            await self.events.put(event.payload)

    async def next(self, timeout: float = 60) -> dict[str, Any]:
        return await asyncio.wait_for(self.events.get(), timeout)

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        if self.task.done() and not self.task.cancelled() and self.task.exception() is not None:
            raise self.task.exception()  # type: ignore[misc]


def trigger(ns: str, conn: str, selector: str, **kwargs: Any) -> KubeflowJobSucceededTrigger:
    kwargs.setdefault("metrics", ["accuracy", "loss"])
    return KubeflowJobSucceededTrigger(
        label_selector=selector, namespace=ns, kubernetes_conn_id=conn, **kwargs
    )


async def _marks(api: Api, ns: str, name: str, wanted: int) -> int:
    """The job's asset-event marks once there are ``wanted`` (a trigger marks a job after its event is taken)."""

    async def count() -> int:
        job = await api.get(ns, name)
        annotations = ((job or {}).get("metadata") or {}).get("annotations") or {}
        return len([k for k in annotations if k.startswith(assets.ANNOTATION_ASSET_EVENT)])

    async def reached() -> bool:
        return await count() >= wanted

    await wait_until(reached)
    return await count()


@pytest.fixture
async def running() -> AsyncIterator[list[Running]]:
    started: list[Running] = []
    yield started
    for run in started:
        run.task.cancel()
        await asyncio.gather(run.task, return_exceptions=True)


async def succeeded(api: Api, ns: str, name: str) -> bool:
    job = await api.get(ns, name)
    return any(
        c["type"] == "Succeeded" and c["status"] == "True"
        for c in (job or {}).get("status", {}).get("conditions", [])
    )


async def failed(api: Api, ns: str, name: str) -> bool:
    job = await api.get(ns, name)
    return any(
        c["type"] == "Failed" and c["status"] == "True"
        for c in (job or {}).get("status", {}).get("conditions", [])
    )


async def test_a_job_created_with_the_client_emits_one_event_with_its_metrics_and_a_restart_emits_it_no_more(
    api: Api, k8s_conn: str, running: list[Running]
) -> None:
    ns = await api.namespace(unique("assets"))
    first = Running(trigger(ns, k8s_conn, "model=digits"))
    running.append(first)
    await wait_until(lambda: any(s["namespace"] == ns for s in assets.streams()))

    # While the watcher waits: a labelled job that fails, one of another model, then the one that counts.
    await api.create(ns, labelled(unique("broken"), {"model": "digits"}, code=1))
    await api.create(ns, labelled(unique("other"), {"model": "resnet"}))
    trained = unique("trained")
    await api.create(ns, labelled(trained, {"model": "digits", "team": "vision"}))

    event = await first.next()
    assert (event["kind"], event["namespace"], event["name"]) == ("TFJob", ns, trained)
    assert event["metrics"] == {"accuracy": 0.93, "loss": 0.21}  # the last values the chief printed
    assert event["metrics_source"] == "worker-0 log" and event["metrics_missing"] == []
    assert event["metrics_note"] is None
    assert event["labels"] == {"model": "digits", "team": "vision"}
    assert event["created_by"] == "other" and event["completion_time"]
    # Marked once it was handed on (the trigger marks after the event is taken): a restart will not emit it again.
    assert await _marks(api, ns, trained, 1) == 1
    await first.stop()

    # No trigger runs now: a job succeeds meanwhile. The restarted trigger (a new instance from the same
    # kwargs, as a triggerer rebuilds it) emits that one and nothing already emitted or failed: had it
    # emitted them, they would come first (the stream hands the jobs it listed before any later change).
    later = unique("later")
    await api.create(ns, labelled(later, {"model": "digits"}))
    await wait_until(lambda: succeeded(api, ns, later), timeout=60)
    _classpath, kwargs = first.trigger.serialize()
    second = Running(KubeflowJobSucceededTrigger(**json.loads(json.dumps(kwargs))))
    running.append(second)
    event = await second.next()
    assert event["name"] == later and event["metrics"]["accuracy"] == 0.93
    latest = unique("latest")
    await api.create(ns, labelled(latest, {"model": "digits"}))
    assert (await second.next())["name"] == latest
    assert second.events.empty()


async def test_a_failed_job_emits_nothing(api: Api, k8s_conn: str, running: list[Running]) -> None:
    ns = await api.namespace(unique("assets"))
    run = Running(trigger(ns, k8s_conn, "model=digits"))
    running.append(run)
    broken = unique("broken")
    await api.create(ns, labelled(broken, {"model": "digits"}, code=1))
    await wait_until(lambda: failed(api, ns, broken), timeout=60)
    # The failure reached the trigger's stream before the next job: the next event is that job's.
    ok = unique("ok")
    await api.create(ns, labelled(ok, {"model": "digits"}))
    assert (await run.next())["name"] == ok
    job = await api.get(ns, broken)
    assert job is not None
    assert not [
        k for k in job["metadata"].get("annotations", {}) if k.startswith(assets.ANNOTATION_ASSET_EVENT)
    ]


async def test_a_job_without_pods_left_still_emits_and_says_why_it_has_no_metrics(
    api: Api, k8s_conn: str, running: list[Running]
) -> None:
    """A job whose status another controller wrote and whose pods are gone (cleaned up): the event goes
    out all the same, its extra saying why the metrics are missing."""
    ns = await api.namespace(unique("assets"))
    name = unique("cleaned")
    await api.create(ns, labelled(name, {"model": "digits"}, external=True))
    run = Running(trigger(ns, k8s_conn, "model=digits"))
    running.append(run)
    await api.set_status(ns, name, succeeded_status(name, ns))
    event = await run.next()
    assert event["name"] == name and event["metrics"] == {}
    assert event["metrics_missing"] == ["accuracy", "loss"]
    assert (
        event["metrics_note"]
        == "no pod of the job is left (cleaned up after it succeeded): its log was not read"
    )


async def test_watchers_of_one_namespace_and_kind_share_one_stream_whatever_their_selectors(
    api: Api, k8s_conn: str, running: list[Running]
) -> None:
    ns = await api.namespace(unique("assets"))
    digits = Running(trigger(ns, k8s_conn, "model=digits"))
    vision = Running(trigger(ns, k8s_conn, "team in (vision,speech),!draft", metrics=[]))
    running.extend([digits, vision])
    await wait_until(lambda: [s for s in assets.streams() if s["namespace"] == ns and s["watchers"] == 2])
    name = unique("both")
    await api.create(ns, labelled(name, {"model": "digits", "team": "vision"}))
    assert (await digits.next())["name"] == name
    assert (await vision.next())["metrics"] == {}  # no metrics asked: the log is not read
    (stream,) = [s for s in assets.streams() if s["namespace"] == ns]
    assert stream["lists"] == 1  # one LIST for both, however many watchers
    assert await _marks(api, ns, name, 2) == 2  # each watcher marks the job for itself


@pytest.fixture(scope="module")
def trainer_cluster() -> Any:
    """A cluster serving Trainer v2 only, with the shipped TensorFlow runtimes installed."""

    from airflow_tfjob.jobs.trainjob.runtimes import cluster_hook, install
    from airflow_tfjob.local import LocalCluster

    with LocalCluster(apis=["trainjob"]) as cluster:
        install(cluster_hook(str(cluster.kubeconfig_path)), log=lambda _: None)
        yield cluster


async def test_a_trainjob_created_as_the_kubeflow_sdk_does_emits_one_event_with_node_0s_metrics(
    trainer_cluster: Any, monkeypatch: pytest.MonkeyPatch, running: list[Running]
) -> None:
    extra = {"kube_config_path": str(trainer_cluster.kubeconfig_path), "namespace": "default"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra})
    )
    async with Api(trainer_cluster.kubeconfig_path) as api:
        name = unique("sdk")
        job = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "labels": {"model": "digits"}},
            "spec": {
                "runtimeRef": {"name": "tensorflow-distributed"},
                "trainer": {
                    "numNodes": 2,
                    "image": "python:3.12",
                    "command": [sys.executable, "-c", TRAIN.format(code=0)],
                },
            },
        }
        run = Running(trigger("default", "kubernetes_default", "model=digits", kind="TrainJob"))
        running.append(run)
        await api.custom.create_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", "default", "trainjobs", job
        )
        event = await run.next(timeout=120)
        assert (event["kind"], event["name"]) == ("TrainJob", name)
        assert event["metrics"] == {"accuracy": 0.93, "loss": 0.21}
        assert event["metrics_source"] == "node-0-0 log"
