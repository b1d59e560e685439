"""Secret values on a real run against the local cluster: a replica that prints one shows ``***``.

The worker registers ``secret_env`` values with Airflow's masker before the job is built; the
trigger registers them from the job object it reads (its kwargs, stored in the database, never
hold them).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest
from operator_support import TaskInstance, context_for
from watch_support import Api, succeeded_status, tfjob_manifest, unique

from airflow_tfjob.build.secrets import with_secret_names
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

PRINTS_TOKEN = "import os; print('token=' + os.environ['API_TOKEN'], flush=True)"


def _masked(text: str) -> str:
    from airflow.sdk._shared.secrets_masker import _secrets_masker

    return str(_secrets_masker().redact(text))


def test_a_replica_printing_its_secret_is_masked_in_the_task_log(
    hook: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    secret = f"tok-{unique('s')}-value"
    op = TFJobOperator(
        task_id="train",
        namespace="default",
        worker=1,
        image="local/python",
        command=[sys.executable, "-c", PRINTS_TOKEN],
        secret_env={"API_TOKEN": secret},
        startup_timeout=60,
    )
    ti = TaskInstance()
    result = op.execute(context_for(ti))
    logged = "".join(capfd.readouterr())
    assert result["state"] == "succeeded"
    assert "token=***" in logged  # the replica's line reached the task log, masked
    assert secret not in logged
    assert secret not in json.dumps(result) + json.dumps(ti.xcoms)


async def test_the_trigger_masks_the_secret_values_of_the_job_it_follows(api: Api, k8s_conn: str) -> None:
    ns = await api.namespace(unique("t"))
    name = unique("masked")
    secret = f"trigger-{unique('s')}-value"
    manifest = tfjob_manifest(name)
    container = manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "API_TOKEN", "value": secret}]
    manifest["metadata"]["annotations"] = with_secret_names({}, ["API_TOKEN"])
    await api.create(ns, manifest)
    assert _masked(f"x {secret} y") == f"x {secret} y"  # not known to the masker yet
    trigger = KubeflowJobTrigger(
        name=name,
        namespace=ns,
        kubernetes_conn_id=k8s_conn,
        options={"get_logs": False, "startup_timeout": None},
    )
    assert secret not in json.dumps(trigger.serialize())
    run = asyncio.ensure_future(asyncio.wait_for(_first(trigger), 30))
    await api.set_status(ns, name, succeeded_status(name, ns))
    event = await run
    assert event["event"] == "succeeded"
    assert _masked(f"x {secret} y") == "x *** y"


async def _first(trigger: KubeflowJobTrigger) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("the trigger yielded nothing")
