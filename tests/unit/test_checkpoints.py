"""checkpoint=: the store it names, the task instance's directory, what every replica is told, the log
lines the training reports checkpoints with, and what a try records for the next (no cluster needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from badinput_support import TaskInstance, task_context

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.build.checkpoints import (
    MOUNT_ROOT,
    CheckpointStore,
    location,
    parse_store,
    replica_env,
    task_key,
    with_checkpoint_env,
)
from airflow_tfjob.constants import LABEL_TRY_NUMBER
from airflow_tfjob.follow.checkpoints import Checkpoint, CheckpointTracker, parse_line
from airflow_tfjob.follow.outcome import FollowOptions, FollowOutcome
from airflow_tfjob.follow.parts import reads_logs
from airflow_tfjob.integrations.parts import PARTS
from airflow_tfjob.jobs.adapter import adapter_for
from airflow_tfjob.operators import checkpointing
from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.operators.trainjob import TrainJobOperator


class StateStore:
    """Airflow 3.3's task_state_store as the operator uses it: values kept across tries."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str, *args: Any) -> None:
        self.lines.append(message % args)

    warning = info


# ---- the store --------------------------------------------------------------------------------


def test_a_claim_is_mounted_under_the_mount_root_and_addressed_there() -> None:
    store = parse_store("pvc://ckpt-claim/team/digits/")
    assert store == CheckpointStore("pvc://ckpt-claim/team/digits", claim="ckpt-claim", path="team/digits")
    assert store.root == f"{MOUNT_ROOT}/ckpt-claim/team/digits"
    volume, mount = store.claim_volume()  # type: ignore[misc]
    assert volume["persistentVolumeClaim"] == {"claimName": "ckpt-claim"}
    assert mount == {"name": volume["name"], "mountPath": f"{MOUNT_ROOT}/ckpt-claim"}
    assert parse_store("pvc://whole").root == f"{MOUNT_ROOT}/whole"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "value", ["s3://models/ckpt", "gs://b/p/", "file:///shared/ckpt", {"uri": "s3://m/c", "conn_id": "aws"}]
)
def test_an_object_store_is_addressed_by_its_uri_and_mounts_nothing(value: Any) -> None:
    store = parse_store(value)
    assert store is not None and not store.is_pvc and store.claim_volume() is None
    assert store.root == store.uri and not store.root.endswith("/")
    assert store.conn_id == (value.get("conn_id") if isinstance(value, dict) else None)


@pytest.mark.parametrize(
    ("value", "field", "problem"),
    [
        ("/tmp/ckpt", "checkpoint", "has no scheme"),
        ("pvc://Bad_Claim/x", "checkpoint", "is not a PersistentVolumeClaim name"),
        ("pvc://claim/../other", "checkpoint", "climbs out of the claim"),
        ("s3://", "checkpoint", "names no bucket"),
        ("file://relative/dir", "checkpoint", "absolute file:///"),
        (7, "checkpoint", "is not a checkpoint location"),
        ({"uri": "s3://b/p", "bucket": "x"}, "checkpoint", "unknown keys ['bucket']"),
        ({"uri": "pvc://c/p", "conn_id": "aws"}, "checkpoint.conn_id", "means nothing for a claim"),
        ({"uri": "s3://b/p", "conn_id": ""}, "checkpoint.conn_id", "is not a connection id"),
    ],
)
def test_a_bad_store_is_refused_naming_the_field_and_the_fix(value: Any, field: str, problem: str) -> None:
    with pytest.raises(JobValidationError) as refused:
        parse_store(value)
    assert refused.value.field == field and problem in refused.value.problem
    assert "pvc://<claim>/<path>" in refused.value.fix and "s3://" in refused.value.fix


def test_the_operator_refuses_a_bad_store_at_parse_before_any_request() -> None:
    with pytest.raises(JobValidationError) as refused:
        TFJobOperator(task_id="t", worker=1, image="i", checkpoint="/shared/ckpt")
    assert [p.field for p in refused.value.problems] == ["checkpoint"]
    # A template waits for its value, then is checked the same way.
    TFJobOperator(task_id="t", worker=1, image="i", checkpoint="{{ params.ckpt }}")


# ---- the task instance's directory ---------------------------------------------------------------


def test_the_directory_is_the_same_for_every_try_and_distinct_per_mapped_index() -> None:
    store = parse_store("s3://models/ckpt")
    assert store is not None
    unmapped = location(store, "dag", "train", "manual__1", -1)
    assert unmapped == "s3://models/ckpt/dag/train/manual__1/unmapped"
    mapped = {location(store, "dag", "train", "manual__1", i) for i in range(3)}
    assert len(mapped) == 3 and unmapped not in mapped
    assert location(store, "dag", "train", "manual__2", -1) != unmapped  # another run: its own


def test_run_ids_become_portable_segments_that_never_collide() -> None:
    a = task_key("dag", "train", "scheduled__2026-01-01T00:00:00+00:00", -1)
    b = task_key("dag", "train", "scheduled__2026-01-01T00_00_00_00_00", -1)
    assert ":" not in a and "+" not in a
    assert a != b
    assert task_key("dag", "group.task", "manual__1", 4).endswith("/group.task/manual__1/map-4")


def test_every_replica_gets_the_directory_and_the_resume_point() -> None:
    assert replica_env("/d", None) == {"CHECKPOINT_DIR": "/d", "RESUME_FROM": ""}
    assert replica_env("/d", "/d/epoch-7") == {"CHECKPOINT_DIR": "/d", "RESUME_FROM": "/d/epoch-7"}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (None, {"CHECKPOINT_DIR": "/d", "RESUME_FROM": ""}),
        ({"A": "1"}, {"A": "1", "CHECKPOINT_DIR": "/d", "RESUME_FROM": ""}),
        (
            [{"name": "A", "value": "1"}],
            [
                {"name": "A", "value": "1"},
                {"name": "CHECKPOINT_DIR", "value": "/d"},
                {"name": "RESUME_FROM", "value": ""},
            ],
        ),
    ],
)
def test_the_variables_join_the_env_parameter_in_its_form(env: Any, expected: Any) -> None:
    given = {"image": "i"} if env is None else {"image": "i", "env": env}
    assert with_checkpoint_env(given, replica_env("/d", None)) == {"image": "i", "env": expected}


@pytest.mark.parametrize("env", [{"CHECKPOINT_DIR": "/mine"}, [{"name": "RESUME_FROM", "value": "x"}]])
def test_a_variable_the_user_sets_under_the_same_name_is_refused(env: Any) -> None:
    with pytest.raises(JobValidationError) as refused:
        with_checkpoint_env({"env": env}, replica_env("/d", None))
    assert refused.value.field == "env" and "checkpoint=" in refused.value.problem


# ---- the manifest, through each API's adapter ---------------------------------------------------


def _rendered(op: Any, ti: TaskInstance | None = None) -> dict[str, Any]:
    result = op.execute(task_context(ti))
    assert result["rendered_only"] is True
    manifest: dict[str, Any] = result["manifest"]
    return manifest


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


def test_a_v1_job_mounts_the_claim_and_exports_the_variables_in_every_replica() -> None:
    op = PyTorchJobOperator(
        task_id="train", master=1, worker=2, image="i", render_only=True, checkpoint="pvc://ckpt/digits",
        env={"A": "1"}, pvc="data:/data",
    )  # fmt: skip
    manifest = _rendered(op, TaskInstance(dag_id="d", run_id="manual__7", map_index=2))
    expected_dir = f"{MOUNT_ROOT}/ckpt/digits/d/train/manual__7/map-2"
    for rtype in ("Master", "Worker"):
        pod = manifest["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]
        (container,) = pod["containers"]
        assert _env(container) == {"A": "1", "CHECKPOINT_DIR": expected_dir, "RESUME_FROM": ""}
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
        assert claims == {"data", "ckpt"}
        assert f"{MOUNT_ROOT}/ckpt" in {m["mountPath"] for m in container["volumeMounts"]}


def test_a_trainjob_gets_the_variables_in_its_trainer_and_the_claim_through_a_runtime_patch() -> None:
    op = TrainJobOperator(
        task_id="train", runtime="torch-distributed", image="i", num_nodes=2, render_only=True,
        checkpoint="pvc://ckpt/digits",
    )  # fmt: skip
    manifest = _rendered(op)
    spec = manifest["spec"]
    assert (
        _env(spec["trainer"])["CHECKPOINT_DIR"]
        == f"{MOUNT_ROOT}/ckpt/digits/bad_inputs/train/manual__1/unmapped"
    )
    (patch,) = spec["runtimePatches"]
    (rjob,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = rjob["template"]["spec"]["template"]["spec"]
    assert rjob["name"] == "node"
    assert pod["volumes"] == [{"name": "tfjob-checkpoints", "persistentVolumeClaim": {"claimName": "ckpt"}}]
    assert pod["containers"] == [
        {"name": "node", "volumeMounts": [{"name": "tfjob-checkpoints", "mountPath": f"{MOUNT_ROOT}/ckpt"}]}
    ]


def test_a_tfjob_run_as_a_trainjob_keeps_its_variables_and_claim() -> None:
    op = TFJobOperator(
        task_id="train",
        worker=2,
        image="i",
        command=["python", "t.py"],
        render_only=True,
        api="trainjob",
        checkpoint="pvc://ckpt",
    )
    spec = _rendered(op)["spec"]
    assert "CHECKPOINT_DIR" in _env(spec["trainer"])
    assert "persistentVolumeClaim" in repr(spec.get("runtimePatches"))


def test_the_adapters_put_a_volume_where_their_builders_read_it() -> None:
    volume, mount = {"name": "v", "emptyDir": {}}, {"name": "v", "mountPath": "/v"}
    v1 = adapter_for("TFJob").with_volume({"volumes": [{"name": "w", "emptyDir": {}}]}, volume, mount)
    assert v1 == {"volumes": [{"name": "w", "emptyDir": {}}, volume], "volume_mounts": [mount]}
    trainjob = adapter_for("TrainJob").with_volume(
        {"runtime_patches": [{"manager": "x.io/mine"}]}, volume, mount
    )
    assert [p["manager"] for p in trainjob["runtime_patches"]] == [
        "x.io/mine",
        "airflow.apache.org/tfjob-provider-v",
    ]


# ---- the log lines -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("checkpoint saved: /c/epoch-0007.npz epoch=7", Checkpoint("/c/epoch-0007.npz", 7)),
        (
            "2026-12-02T07:00:00Z checkpoint saved: s3://b/p/ckpt-12 step=1200 epoch=3",
            Checkpoint("s3://b/p/ckpt-12", 3, 1200),
        ),
        ("INFO checkpoint saved: /c/last", Checkpoint("/c/last")),
        ("epoch=7 loss=0.1", None),
        ("checkpoint saved:", None),
    ],
)
def test_a_checkpoint_line_names_the_path_and_how_far_training_came(
    line: str, expected: Checkpoint | None
) -> None:
    assert parse_line(line) == expected


def test_the_tracker_keeps_the_newest_from_the_start_point_on() -> None:
    tracker = CheckpointTracker({"path": "/c/epoch-2", "epoch": 2})
    assert tracker.state() == {"path": "/c/epoch-2", "epoch": 2, "step": None}
    tracker.feed("epoch=3 loss=1")
    tracker.feed("checkpoint saved: /c/epoch-3 epoch=3")
    assert tracker.newest == Checkpoint("/c/epoch-3", 3) and tracker.reported == 1
    assert tracker.newest.resuming_line() == "resuming from /c/epoch-3 (epoch 3)"
    assert CheckpointTracker(None).state() is None
    assert Checkpoint.from_dict({"path": 7}) is None and Checkpoint.from_dict(
        {"path": "p", "epoch": True}
    ) == Checkpoint("p")


def test_the_options_and_the_outcome_carry_it_through_the_trigger() -> None:
    options = FollowOptions.of(get_logs=False, checkpoints=True, resume_from={"path": "/c/e1", "epoch": 1})
    assert reads_logs(options, PARTS)  # the checkpoint lines are read even when no log is shown
    assert not reads_logs(FollowOptions.of(get_logs=False), PARTS)
    assert FollowOptions.from_dict(options.to_dict()) == options
    outcome = FollowOutcome("failed", parts={"checkpoint": {"path": "/c/e4", "epoch": 4, "step": None}})
    assert FollowOutcome.from_dict(outcome.to_dict()).part("checkpoint") == outcome.part("checkpoint")


# ---- what a try reads and records ----------------------------------------------------------------


def _context(state: StateStore | None, ti: TaskInstance | None = None) -> dict[str, Any]:
    context = task_context(ti)
    if state is not None:
        context["task_state_store"] = state
    return context


def test_a_try_records_the_newest_and_the_next_try_resumes_from_it() -> None:
    state, log = StateStore(), Log()
    first = checkpointing.plan_for("s3://m/c", _context(state), log)
    assert first is not None and first.resume is None
    assert first.env() == {
        "CHECKPOINT_DIR": "s3://m/c/bad_inputs/train/manual__1/unmapped",
        "RESUME_FROM": "",
    }
    context = _context(state)
    checkpointing.record(first, {"path": f"{first.directory}/epoch-7", "epoch": 7}, context, log)
    recorded = {"path": f"{first.directory}/epoch-7", "epoch": 7, "step": None, "directory": first.directory}
    assert state.values["checkpoint"] == recorded
    assert context["ti"].xcoms["checkpoint"] == recorded
    second = checkpointing.plan_for("s3://m/c", _context(state, TaskInstance(try_number=2)), log)
    assert second is not None and second.source == "recorded"
    assert second.env()["RESUME_FROM"] == f"{first.directory}/epoch-7"
    assert second.follow_fields() == {
        "checkpoints": True,
        "resume_from": {"path": f"{first.directory}/epoch-7", "epoch": 7, "step": None},
    }


def test_a_record_for_another_store_is_not_resumed_from() -> None:
    state = StateStore()
    state.set("checkpoint", {"path": "s3://old/x/epoch-3", "epoch": 3, "directory": "s3://old/x"})
    plan = checkpointing.plan_for("pvc://claim", _context(state), Log())
    assert plan is not None and plan.resume is None


def test_without_a_record_an_object_store_is_listed_and_a_claim_is_not(tmp_path: Path) -> None:
    log = Log()
    store = f"file://{tmp_path}"
    directory = Path(
        checkpointing.plan_for(store, _context(None), log, look=False).directory[len("file://") :]
    )  # type: ignore[union-attr]
    directory.mkdir(parents=True)
    for name in ("epoch-0002.npz", "epoch-0010.npz", ".incomplete-123", "notes.txt"):
        (directory / name).write_text("x")
    plan = checkpointing.plan_for(store, _context(None), log)
    assert plan is not None and plan.source == "listed"
    assert plan.resume == Checkpoint(f"file://{directory}/epoch-0010.npz", 10)
    assert checkpointing.plan_for(store, _context(None), log, look=False).resume is None  # type: ignore[union-attr]
    assert checkpointing.plan_for("pvc://claim", _context(None), log).resume is None  # type: ignore[union-attr]


def test_a_checkpoint_saved_after_the_record_wins_over_it(tmp_path: Path) -> None:
    """A replica preempted just after saving epoch 8 whose line the follow never read: the record says 7,
    the directory holds 8, and the next try is told 8; an older listing leaves the record alone."""
    state, log = StateStore(), Log()
    store = f"file://{tmp_path}"
    directory = checkpointing.plan_for(store, _context(state), log, look=False).directory  # type: ignore[union-attr]
    folder = Path(directory[len("file://") :])
    folder.mkdir(parents=True)
    for epoch in (6, 7):
        (folder / f"epoch-{epoch}").write_text("x")
    state.set("checkpoint", {"path": f"{directory}/epoch-7", "epoch": 7, "directory": directory})
    plan = checkpointing.plan_for(store, _context(state), log)
    assert plan is not None and (plan.source, plan.resume) == ("recorded", Checkpoint(f"{directory}/epoch-7", 7))
    (folder / "epoch-8").write_text("x")
    plan = checkpointing.plan_for(store, _context(state), log)
    assert plan is not None and (plan.source, plan.resume) == ("listed", Checkpoint(f"{directory}/epoch-8", 8))
    # A record in steps is not overruled by names in epochs.
    state.set("checkpoint", {"path": f"{directory}/step-100", "step": 100, "directory": directory})
    plan = checkpointing.plan_for(store, _context(state), log)
    assert plan is not None and plan.source == "recorded" and plan.resume.step == 100  # type: ignore[union-attr]


def test_the_task_log_says_where_it_resumes_from_only_for_a_job_this_try_created() -> None:
    plan = checkpointing.CheckpointPlan(
        parse_store("s3://m/c"), "s3://m/c/d", Checkpoint("s3://m/c/d/e7", 7), "recorded"
    )  # type: ignore[arg-type]
    created = {"metadata": {"labels": {LABEL_TRY_NUMBER: "2"}}}
    log = Log()
    checkpointing.announce(plan, created, _context(None, TaskInstance(try_number=2)), log)
    checkpointing.announce(plan, created, _context(None, TaskInstance(try_number=3)), log)
    assert log.lines == [
        "Checkpoints in s3://m/c/d; resuming from s3://m/c/d/e7 (epoch 7) (recorded by an earlier try)",
        "Checkpoints in s3://m/c/d",
    ]
