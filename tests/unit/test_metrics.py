from __future__ import annotations

import json

import pytest

from airflow_tfjob.follow.metrics import METRIC_RE, MetricsCollector, line_timestamp, parse_line


def test_regex_is_katibs_default_filter() -> None:
    assert METRIC_RE.pattern == r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"


@pytest.mark.parametrize(
    ("line", "names", "expected"),
    [
        ("loss=0.3 accuracy=.98", ["loss", "accuracy"], [("loss", 0.3), ("accuracy", 0.98)]),
        ("lr=1e-3", ["lr"], [("lr", 1e-3)]),
        ("loss = 0.5", ["loss"], [("loss", 0.5)]),
        ("loss: 0.5", ["loss"], []),
        ("acc=", ["acc"], []),
        ("acc=98%", ["acc"], [("acc", 98.0)]),
        ("val-loss=-2.5E+2", ["val-loss"], [("val-loss", -250.0)]),
        ("val_loss=0.2 loss=0.4", ["loss"], [("loss", 0.4)]),  # substring val_loss is another name
        ("epoch 3: loss=0.1, loss=0.05", ["loss"], [("loss", 0.1), ("loss", 0.05)]),
        ("accuracy=+", ["accuracy"], []),
        ("accuracy=. loss=1", ["accuracy", "loss"], [("loss", 1.0)]),
        ("nothing here", ["loss"], []),
    ],
)
def test_parse_line_examples(line: str, names: list[str], expected: list[tuple[str, float]]) -> None:
    assert parse_line(line, names) == expected


@pytest.mark.parametrize(
    ("line", "stamp"),
    [
        ("2025-01-01T10:00:00.123456789Z loss=0.3", "2025-01-01T10:00:00.123456789Z"),
        ("2025-01-01T10:00:00+02:00 loss=0.3", "2025-01-01T10:00:00+02:00"),
        ("2025-01-01 loss=0.3", None),
        ("loss=0.3", None),
    ],
)
def test_timestamps(line: str, stamp: str | None) -> None:
    assert line_timestamp(line) == stamp


def test_collector_last_values_missing_and_history() -> None:
    col = MetricsCollector(["accuracy", "loss", "f1"], history=True)
    col.feed("2025-01-01T10:00:00Z epoch=1 loss=0.9 accuracy=0.5")
    col.feed(b"2025-01-01T10:00:05Z epoch=2 loss=0.4 accuracy=0.8\n")
    col.feed("accuracy=")  # empty value: skipped, no crash
    col.feed(b"\xff\xfe loss=0.3")  # undecodable bytes around a metric
    result = col.result()
    assert result["accuracy"] == 0.8
    assert result["loss"] == 0.3
    assert "f1" not in result
    assert result["missing"] == ["f1"]
    assert result["history"]["loss"] == [
        {"value": 0.9, "timestamp": "2025-01-01T10:00:00Z"},
        {"value": 0.4, "timestamp": "2025-01-01T10:00:05Z"},
        {"value": 0.3, "timestamp": None},
    ]
    assert result["history"]["f1"] == []
    json.dumps(result)  # XCom-safe


def test_collector_without_history_has_no_history_key() -> None:
    col = MetricsCollector(["loss"])
    col.feed_many(["loss=1", "loss=2"])
    assert col.result() == {"loss": 2.0, "missing": []}


def test_collector_with_no_names_ignores_everything() -> None:
    col = MetricsCollector([])
    assert col.feed("loss=1") == []
    assert col.result() == {"missing": []}


def test_history_is_bounded() -> None:
    col = MetricsCollector(["loss"], history=True, max_history=3)
    for i in range(10):
        col.feed(f"loss={i}")
    result = col.result()
    assert [p["value"] for p in result["history"]["loss"]] == [0.0, 8.0, 9.0]
    assert result["history_dropped"] == {"loss": 7}
    assert result["loss"] == 9.0


@pytest.mark.parametrize("names", [["history"], ["missing"], ["train/loss"], ["a b"]])
def test_rejects_unusable_names(names: list[str]) -> None:
    with pytest.raises(ValueError, match="metric names"):
        MetricsCollector(names)


def test_restore_continues_from_an_earlier_result() -> None:
    """A deferred task's drain continues from the trigger's collector: a metric the trigger saw is not
    missing, new values extend the history, and a metric still unseen stays missing."""
    earlier = MetricsCollector(["accuracy", "loss", "f1"], history=True)
    earlier.feed("2025-01-01T00:00:00Z accuracy=0.5 loss=1.0")
    later = MetricsCollector(["accuracy", "loss", "f1"], history=True)
    later.restore(json.loads(json.dumps(earlier.result())))  # as it travels in the trigger's event
    later.feed("2025-01-01T00:00:01Z accuracy=0.9")
    result = later.result()
    assert (result["accuracy"], result["loss"], result["missing"]) == (0.9, 1.0, ["f1"])
    assert [p["value"] for p in result["history"]["accuracy"]] == [0.5, 0.9]
    assert [p["value"] for p in result["history"]["loss"]] == [1.0]


def test_restore_without_history_keeps_the_values_only() -> None:
    later = MetricsCollector(["accuracy"])
    later.restore({"accuracy": 0.9, "missing": ["accuracy"]})  # a stale "missing" is recomputed
    assert later.result() == {"accuracy": 0.9, "missing": []}
