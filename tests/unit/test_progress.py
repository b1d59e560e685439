"""Progress lines from a job's printed metric: figures, throttling, the state a drain continues from.

The clock is a list the test advances: every figure below is exact.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from airflow_tfjob.build.validation import JobValidationError
from airflow_tfjob.follow.progress import ProgressTracker, ReportedProgressLog, duration
from airflow_tfjob.follow.progress_spec import ProgressSpec, check_progress, progress_spec
from airflow_tfjob.jobs.kinds import TRAINJOB
from airflow_tfjob.jobs.trainjob.adapter import adapter as trainjob_adapter


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_percentage_rate_and_time_left_from_the_epochs_printed() -> None:
    clock = Clock()
    tracker = ProgressTracker(ProgressSpec("epoch", 10), clock)
    clock.now += 20  # start-up: not counted once a second epoch gives a measure
    assert tracker.feed_line("epoch=1 loss=1.1042 accuracy=0.6676") == (
        "progress: epoch 1/10 (10%), 20 s per epoch, about 3 min 0 s left"
    )
    clock.now += 5
    assert tracker.feed_line("epoch=2 loss=0.2765 accuracy=0.9020") == (
        "progress: epoch 2/10 (20%), 5 s per epoch, about 40 s left"
    )
    assert tracker.rate() == pytest.approx(0.2)
    clock.now += 5
    assert tracker.feed_line("epoch=10 loss=0.1") == "progress: epoch 10/10 (100%), 1 s per epoch, done"


def test_fast_rates_read_as_units_per_second_and_the_end_says_done() -> None:
    clock = Clock()
    tracker = ProgressTracker(ProgressSpec("step", 100, every=0), clock)
    tracker.feed(10)
    clock.now += 2
    assert tracker.feed(50) == "progress: step 50/100 (50%), 20 step/s, about 2 s left"
    clock.now += 2
    assert tracker.feed(100) == "progress: step 100/100 (100%), 22.5 step/s, done"
    assert tracker.eta() == 0


def test_at_most_one_line_every_n_seconds_besides_each_tenth() -> None:
    clock = Clock()
    tracker = ProgressTracker(ProgressSpec("step", 1000, every=30), clock)
    shown = []
    for step in range(1, 1001):
        clock.now += 0.1  # 100 s in all
        line = tracker.feed(step)
        if line is not None:
            shown.append((round(clock.now - 1000, 1), step))
    # The first value, then every 100 steps (a tenth: 10 s apart here, closer than `every`).
    assert [step for _, step in shown] == [1, *range(100, 1001, 100)]


def test_between_tenths_the_interval_paces_the_lines() -> None:
    clock = Clock()
    tracker = ProgressTracker(ProgressSpec("step", 1000, every=30), clock)
    shown = []
    for step in range(1, 100):  # under a tenth in all, one step a second
        clock.now += 1
        if tracker.feed(step) is not None:
            shown.append(step)
    assert shown == [1, 31, 61, 91]


def test_a_value_printed_again_is_not_progress() -> None:
    tracker = ProgressTracker(ProgressSpec("epoch", 4, every=0), Clock())
    assert tracker.feed_line("epoch=1 loss=2") is not None
    assert tracker.feed_line("epoch=1 accuracy=0.5") is None
    assert tracker.feed_line("loss=2 (no epoch here)") is None
    assert tracker.feed_line("epochs=3") is None  # another name
    assert [v for _, v in tracker.timeline] == [1.0]


def test_no_rate_before_anything_moved() -> None:
    clock = Clock()
    tracker = ProgressTracker(ProgressSpec("epoch", 3), clock)
    assert tracker.rate() is None and tracker.eta() is None
    assert tracker.line() == "progress: epoch 0/3 (0%)"
    assert tracker.feed(0) == "progress: epoch 0/3 (0%)"  # step 0 printed at the start


def test_state_is_json_and_a_restored_tracker_goes_on_where_it_stopped() -> None:
    clock = Clock()
    tracker = ProgressTracker(ProgressSpec("epoch", 10, every=60), clock)
    for epoch in (1, 2, 3):
        clock.now += 10
        tracker.feed(epoch)
    state = json.loads(json.dumps(tracker.state()))
    assert state["timeline"] == [[1010.0, 1.0], [1020.0, 2.0], [1030.0, 3.0]]
    assert state["percent"] == 30.0 and state["rate_per_second"] == pytest.approx(0.1)
    assert state["eta_seconds"] == 70.0

    again = ProgressTracker.restore(state, clock)
    clock.now += 1
    assert again.feed(3.5) is None  # same tenth, within `every` of the last line: throttled still
    clock.now += 9
    assert again.feed(4) == "progress: epoch 4/10 (40%), 10 s per epoch, about 1 min 0 s left"
    assert [v for _, v in again.timeline] == [1.0, 2.0, 3.0, 3.5, 4.0]


def test_a_long_timeline_keeps_its_first_point_and_the_latest() -> None:
    clock = Clock()
    tracker = ProgressTracker(ProgressSpec("step", 10_000, every=0), clock)
    for step in range(1, 1201):
        clock.now += 1
        tracker.feed(step)
    assert len(tracker.timeline) == 1000 and tracker.dropped == 200
    assert tracker.timeline[0][1] == 1 and tracker.timeline[-1][1] == 1200
    assert tracker.rate() == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0, "0 s"), (44.6, "45 s"), (200, "3 min 20 s"), (7500, "2 h 5 min")]
)
def test_durations_read_at_a_glance(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


def test_the_total_may_be_a_hyperparameter() -> None:
    spec = progress_spec({"metric": "epoch", "total": "epochs"}, {"epochs": "12", "batch_size": 32})
    assert spec == ProgressSpec("epoch", 12.0)
    assert progress_spec({"metric": "step", "total": "500", "every": 5}, None) == ProgressSpec(
        "step", 500.0, 5.0
    )
    assert progress_spec(None, {}) is None


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        (["epoch", 10], "progress", "must be a dict"),
        ({"metric": "epoch", "total": 10, "every_s": 5}, "progress", "unknown keys ['every_s']"),
        ({"metric": "epoch count", "total": 10}, "progress.metric", "not a metric name"),
        ({"metric": "epoch"}, "progress.total", "is missing"),
        ({"metric": "epoch", "total": 0}, "progress.total", "above 0"),
        ({"metric": "epoch", "total": True}, "progress.total", "a number or a hyperparameter"),
        ({"metric": "epoch", "total": 3, "every": -1}, "progress.every", ">= 0"),
    ],
)
def test_bad_progress_names_the_field_and_the_fix(value: object, field: str, words: str) -> None:
    with pytest.raises(JobValidationError) as error:
        check_progress(value)
    assert error.value.field == field and words in error.value.problem
    assert 'progress={"metric": "epoch", "total": 10}' in error.value.fix


def test_a_total_naming_a_missing_hyperparameter_is_refused_at_run_time() -> None:
    check_progress({"metric": "epoch", "total": "epochs"})  # a name: known only once rendered
    with pytest.raises(JobValidationError, match="hyperparameter 'epochs', whose value None"):
        progress_spec({"metric": "epoch", "total": "epochs"}, {"epoch": 3})


def test_the_operator_refuses_a_bad_progress_at_parse_time() -> None:
    from airflow_tfjob.operators.tfjob import TFJobOperator

    with pytest.raises(JobValidationError) as error:
        TFJobOperator(task_id="t", image="python:3.11", command=["true"], progress={"metric": "epoch"})
    assert error.value.field == "progress.total"


def test_the_operator_refuses_a_total_naming_no_hyperparameter_before_submitting() -> None:
    from airflow_tfjob.operators.tfjob import TFJobOperator

    op = TFJobOperator(
        task_id="t",
        image="python:3.11",
        command=["true"],
        hyperparameters={"epoch": 3},
        progress={"metric": "epoch", "total": "epochs"},
        render_only=True,
    )
    ti = SimpleNamespace(dag_id="d", task_id="t", run_id="manual__1", map_index=-1, try_number=1)
    with pytest.raises(JobValidationError, match="names the hyperparameter 'epochs'"):
        op.execute({"ti": ti, "run_id": ti.run_id})  # type: ignore[typeddict-item]


def test_a_restarted_replica_counting_again_restarts_the_measure() -> None:
    clock = Clock()
    tracker = ProgressTracker(ProgressSpec("epoch", 10, every=60), clock)
    for epoch in (1, 2, 3, 4):
        clock.now += 10
        tracker.feed(epoch)
    clock.now += 100  # the replica died and came back
    assert tracker.feed(1) == "progress: epoch 1/10 (10%)"  # shown at once; no pace measured yet
    clock.now += 5
    assert tracker.feed(2) == "progress: epoch 2/10 (20%), 5 s per epoch, about 40 s left"
    assert [v for _, v in tracker.timeline] == [1, 2, 3, 4, 1, 2]
    again = ProgressTracker.restore(json.loads(json.dumps(tracker.state())), clock)
    assert again.rate() == pytest.approx(0.2)


def _trainjob(percent: int, left: int | None = None, **metrics: str) -> dict:
    status = {
        "progressPercentage": percent,
        "lastUpdatedTime": f"2026-01-01T00:00:{percent % 60:02d}Z",
        "metrics": [{"name": k, "value": v} for k, v in metrics.items()],
    }
    if left is not None:
        status["estimatedRemainingSeconds"] = left
    return {"kind": "TrainJob", "status": {"trainerStatus": status}}


def test_reported_progress_lines_are_throttled_like_the_metric_and_the_last_one_is_never_lost() -> None:
    """Trainer's trainerStatus (a TrainJob's status) through its adapter: a line on each tenth crossed or
    every `every` seconds, nothing for a report seen again, the held-back last one at the end."""
    read = trainjob_adapter(TRAINJOB).reported_progress
    clock = Clock()
    log = ReportedProgressLog(clock, every=30)
    assert log.feed(read({"kind": "TrainJob", "status": {}})) is None and log.state() is None
    assert (
        log.feed(read(_trainjob(1, 600, loss="2.5"))) == "Trainer reports 1%, about 10 min 0 s left, loss=2.5"
    )
    assert log.feed(read(_trainjob(1, 600, loss="2.5"))) is None  # the same report seen again
    clock.now += 1
    assert log.feed(read(_trainjob(2, 590, loss="2.4"))) is None  # chatty: within the tenth and 30 s
    assert log.feed(read(_trainjob(10, 540))) == "Trainer reports 10%, about 9 min 0 s left"
    clock.now += 31
    assert log.feed(read(_trainjob(11))) == "Trainer reports 11%"  # 30 s on
    assert log.feed(read(_trainjob(12, 0))) is None
    assert log.final() == "Trainer reports 12%, done"
    assert log.final() is None
    state = json.loads(json.dumps(log.state()))
    assert state["key"] == "trainer_status" and state["value"]["percentage"] == 12

    # A deferred task's drain continues from the trigger's state: nothing logged twice.
    drain = ReportedProgressLog.for_follow(state)
    assert drain.feed(read(_trainjob(12, 0))) is None and drain.final() is None
    assert drain.state() == state
    assert drain.feed(read(_trainjob(100, 0))) == "Trainer reports 100%, done"


def test_the_v1_kinds_report_no_progress_in_their_status() -> None:
    from airflow_tfjob.jobs.adapter import adapter_for

    assert adapter_for("TFJob").reported_progress({"kind": "TFJob", "status": {"trainerStatus": {}}}) is None
