"""KubeflowJobSucceededTrigger's parts that need no cluster: its kwargs, its checks of bad input (in the DAG
file, before any request), the label selector it matches jobs with, and the watcher id its mark carries.
The trigger against the local cluster: tests/integration/test_asset_trigger.py (and under a real
triggerer, test_asset_triggerer.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from airflow_tfjob.integrations.assets import ANNOTATION_ASSET_EVENT, emitted, watcher_id
from airflow_tfjob.integrations.label_selector import LabelSelector
from airflow_tfjob.triggers.assets import KubeflowJobSucceededTrigger


def test_kwargs_round_trip_and_the_watcher_id_follows_them() -> None:
    trigger = KubeflowJobSucceededTrigger("model=digits", "team-a", kind="PyTorchJob", metrics=["accuracy"])
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_tfjob.triggers.assets.KubeflowJobSucceededTrigger"
    rebuilt = KubeflowJobSucceededTrigger(**json.loads(json.dumps(kwargs)))
    assert rebuilt.serialize() == (classpath, kwargs)
    assert watcher_id(rebuilt.serialize()[1]) == watcher_id(kwargs)  # the same mark after a restart
    other = KubeflowJobSucceededTrigger("model=digits", "team-a", kind="PyTorchJob", metrics=["loss"])
    assert watcher_id(other.serialize()[1]) != watcher_id(kwargs)  # another trigger: its own mark
    assert len(ANNOTATION_ASSET_EVENT.split("/", 1)[1] + watcher_id(kwargs)) <= 63  # a valid annotation name


def test_the_marked_job_is_the_emitted_one() -> None:
    job = {"metadata": {"annotations": {ANNOTATION_ASSET_EVENT + "abc": "2026-12-02T00:00:00Z"}}}
    assert emitted(job, "abc") and not emitted(job, "abd") and not emitted({"metadata": {}}, "abc")


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"label_selector": ""}, "label_selector: give the labels"),
        ({"label_selector": "  "}, "label_selector: give"),
        ({"label_selector": "=digits"}, "label_selector '=digits': '=digits' is not a requirement"),
        ({"label_selector": "a in b"}, "label_selector 'a in b': 'a in b' is not a requirement"),
        ({"label_selector": "a=b", "kind": "MPIJob"}, "kind: unknown job kind 'MPIJob'"),
        ({"label_selector": "a=b", "metrics": "accuracy"}, "metrics: give a list of metric names"),
        ({"label_selector": "a=b", "metrics": ["top 1"]}, "metrics: metric names ['top 1'] can never match"),
        ({"label_selector": "a=b", "namespace": ""}, "namespace: '' is not a namespace name"),
    ],
)
def test_bad_input_is_refused_in_the_dag_file_naming_the_parameter(kwargs: dict, named: str) -> None:
    with pytest.raises(ValueError, match="^" + named.replace("(", r"\(").replace("[", r"\[")):
        KubeflowJobSucceededTrigger(**kwargs)


def test_the_label_selector_reads_as_the_api_server_does() -> None:
    selector = LabelSelector.parse("model=digits, stage in (prod, staging),!draft,team!=speech,owner")
    assert selector.matches({"model": "digits", "stage": "prod", "owner": "ana"})
    assert selector.matches({"model": "digits", "stage": "staging", "owner": "ana", "team": "vision"})
    assert not selector.matches({"model": "digits", "stage": "dev", "owner": "ana"})  # not in the set
    assert not selector.matches({"model": "digits", "stage": "prod", "owner": "ana", "draft": ""})  # !draft
    assert not selector.matches({"model": "digits", "stage": "prod", "owner": "ana", "team": "speech"})
    assert not selector.matches({"model": "digits", "stage": "prod"})  # owner must exist
    assert LabelSelector.parse("example.com/model==digits").matches({"example.com/model": "digits"})
    assert LabelSelector.parse("stage notin (prod)").matches({})  # absent counts as not in


def test_a_dag_file_importing_the_trigger_loads_no_kubernetes_client() -> None:
    code = (
        "import sys\n"
        "from airflow_tfjob.triggers.assets import KubeflowJobSucceededTrigger\n"
        "KubeflowJobSucceededTrigger('model=digits', metrics=['accuracy'])\n"
        "print(sorted(m for m in ('kubernetes', 'kubernetes_asyncio', 'aiohttp') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "[]"
