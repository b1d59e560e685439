"""TF_CONFIG byte for byte as training-operator v1.9.4 writes it (addresses aside)."""

from __future__ import annotations

import pytest

from airflow_tfjob.local.controllers.v1.tfconfig import is_distributed, tf_config


def svc(ns: str, job: str) -> object:
    """The operator's own address form, to compare with the reference's sample byte for byte."""
    return lambda rt, i: f"{job}-{rt}-{i}.{ns}.svc:2222"


def test_reference_sample_is_reproduced_byte_for_byte() -> None:
    counts = {"chief": 1, "ps": 2, "worker": 2, "evaluator": 1}
    expected = (
        '{"cluster":{"chief":["mnist-chief-0.ml.svc:2222"],"evaluator":["mnist-evaluator-0.ml.svc:2222"],'
        '"ps":["mnist-ps-0.ml.svc:2222","mnist-ps-1.ml.svc:2222"],'
        '"worker":["mnist-worker-0.ml.svc:2222","mnist-worker-1.ml.svc:2222"]},'
        '"task":{"type":"worker","index":1},"environment":"cloud"}'
    )
    assert tf_config(counts, "Worker", 1, svc("ml", "mnist")) == expected  # type: ignore[arg-type]


def local(rt: str, i: int) -> str:
    ports = {"chief": 5000, "master": 5100, "ps": 6000, "worker": 7000, "evaluator": 8000, "foo": 9000}
    return f"127.0.0.1:{ports[rt] + i}"


CASES = [
    pytest.param(
        {"chief": 1, "ps": 1, "worker": 2, "evaluator": 1},
        "chief",
        0,
        False,
        '{"cluster":{"chief":["127.0.0.1:5000"],"evaluator":["127.0.0.1:8000"],"ps":["127.0.0.1:6000"],'
        '"worker":["127.0.0.1:7000","127.0.0.1:7001"]},"task":{"type":"chief","index":0},"environment":"cloud"}',
        id="chief+ps+worker+evaluator",
    ),
    pytest.param(
        {"worker": 3},
        "worker",
        2,
        False,
        '{"cluster":{"worker":["127.0.0.1:7000","127.0.0.1:7001","127.0.0.1:7002"]},'
        '"task":{"type":"worker","index":2},"environment":"cloud"}',
        id="worker-only",
    ),
    pytest.param(
        {"master": 1, "worker": 1},
        "master",
        0,
        False,
        '{"cluster":{"master":["127.0.0.1:5100"],"worker":["127.0.0.1:7000"]},'
        '"task":{"type":"master","index":0},"environment":"cloud"}',
        id="master-stays-master",
    ),
    pytest.param(
        {"worker": 1, "foo": 1},
        "foo",
        0,
        False,
        None,
        id="unknown-type-not-counted-so-one-replica",
    ),
    pytest.param(
        {"worker": 2, "foo": 1},
        "foo",
        0,
        False,
        '{"cluster":{"foo":["127.0.0.1:9000"],"worker":["127.0.0.1:7000","127.0.0.1:7001"]},'
        '"task":{"type":"foo","index":0},"environment":"cloud"}',
        id="unknown-type-listed",
    ),
    pytest.param({"worker": 1}, "worker", 0, False, None, id="single-worker-none"),
    pytest.param({"chief": 1, "worker": 0}, "chief", 0, False, None, id="single-chief-none"),
    pytest.param(
        {"ps": 2, "worker": 2},
        "worker",
        1,
        True,
        '{"cluster":{"worker":{"1":"127.0.0.1:7001"},"ps":["127.0.0.1:6000","127.0.0.1:6001"]},'
        '"task":{"type":"worker","index":1}}',
        id="sparse-worker",
    ),
    pytest.param(
        {"ps": 2, "worker": 2},
        "ps",
        1,
        True,
        '{"cluster":{"worker":{},"ps":["127.0.0.1:6001"]},"task":{"type":"ps","index":1}}',
        id="sparse-ps",
    ),
    pytest.param(
        {"chief": 1, "ps": 1, "worker": 1},
        "chief",
        0,
        True,
        '{"cluster":{"worker":{},"ps":[]},"task":{"type":"chief","index":0}}',
        id="sparse-chief",
    ),
    pytest.param(
        {"worker": 2},
        "worker",
        0,
        True,
        '{"cluster":{"worker":{"0":"127.0.0.1:7000"},"ps":null},"task":{"type":"worker","index":0}}',
        id="sparse-worker-without-ps-is-null",
    ),
]


@pytest.mark.parametrize(("counts", "rtype", "index", "dynamic", "expected"), CASES)
def test_tf_config(
    counts: dict[str, int], rtype: str, index: int, dynamic: bool, expected: str | None
) -> None:
    assert tf_config(counts, rtype, index, local, dynamic_worker=dynamic) == expected


@pytest.mark.parametrize(
    ("counts", "distributed"),
    [
        ({"worker": 1}, False),
        ({"worker": 2}, True),
        ({"chief": 1, "worker": 0}, False),
        ({"ps": 0}, True),
        ({"worker": 0}, True),
        ({"chief": 1, "evaluator": 1}, True),
    ],
)
def test_is_distributed(counts: dict[str, int], distributed: bool) -> None:
    assert is_distributed(counts) is distributed
