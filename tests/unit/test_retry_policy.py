"""The training-aware retry policy at its lowest level: a failing replica's evidence -> its cause
(follow/failure.py), a cause -> the decision (operators/retry_policy.py), and what a decision leaves for
the next try (the raised memory limit in the manifest, the decisions in XCom)."""

from __future__ import annotations

import pickle
from datetime import timedelta
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.follow import diagnostics
from airflow_tfjob.follow.failure import FailureCause, TrainingJobFailed, classify, replica_cause
from airflow_tfjob.follow.outcome import FollowOutcome
from airflow_tfjob.hooks.retry import ApiCallFailed
from airflow_tfjob.operators.retry_policy import (
    STATE_KEY,
    XCOM_DECISION,
    XCOM_HISTORY,
    RetryAction,
    TrainingRetryPolicy,
    apply_to_manifest,
    cause_of,
    memory_text,
)
from airflow_tfjob.operators.submit import refusal
from airflow_tfjob.version_compat import AIRFLOW_V_3_3_PLUS, AirflowException

SPECS_NEVER = {"Worker": {"replicas": 2, "restartPolicy": "Never"}}
SPECS_EXITCODE = {"Worker": {"replicas": 2, "restartPolicy": "ExitCode"}}


def failure(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "replica": "worker-1",
        "pod": "job-worker-1",
        "reason": "Error",
        "exit_code": 1,
        "message": "",
        "last_lines": [],
        "replica_type": "worker",
        "memory_limit": None,
        "deleted": False,
        "disruption": None,
    }
    return {**base, **fields}


TRACEBACK = [
    "epoch 1 loss=0.5",
    "Traceback (most recent call last):",
    '  File "train.py", line 3, in <module>',
    "    raise ValueError('learning rate must be positive')",
    "ValueError: learning rate must be positive",
]


@pytest.mark.parametrize(
    ("evidence", "specs", "category", "reason"),
    [
        (
            failure(reason="OOMKilled", exit_code=137, memory_limit="128Mi"),
            SPECS_NEVER,
            "out_of_memory",
            "OOMKilled",
        ),
        (
            failure(exit_code=None, reason="DeletionByTaintManager", disruption="DeletionByTaintManager"),
            SPECS_NEVER,
            "infrastructure",
            "NodeLost",
        ),
        (
            failure(exit_code=None, reason="DeletionByPodGC", disruption="DeletionByPodGC"),
            SPECS_NEVER,
            "infrastructure",
            "NodeLost",
        ),
        (failure(exit_code=None, reason="NodeLost"), SPECS_NEVER, "infrastructure", "NodeLost"),
        (
            failure(exit_code=None, reason="Evicted", message="The node was low on resource: memory."),
            SPECS_NEVER,
            "infrastructure",
            "Evicted",
        ),
        (
            failure(exit_code=None, reason="EvictionByEvictionAPI", disruption="EvictionByEvictionAPI"),
            SPECS_NEVER,
            "infrastructure",
            "Evicted",
        ),
        (
            failure(exit_code=None, reason="Deleted", deleted=True),
            SPECS_NEVER,
            "infrastructure",
            "PodDeleted",
        ),
        (failure(exit_code=143, deleted=True), SPECS_NEVER, "infrastructure", "PodDeleted"),
        # Deleted by its controller after it had failed by itself: its own exit code speaks.
        (failure(exit_code=1, deleted=True, last_lines=TRACEBACK), SPECS_NEVER, "user", "Traceback"),
        (
            failure(
                exit_code=None, reason="ImagePullBackOff", message='Back-off pulling image "x.invalid/a"'
            ),
            SPECS_NEVER,
            "user",
            "ImagePull",
        ),
        (failure(exit_code=1, last_lines=TRACEBACK), SPECS_NEVER, "user", "Traceback"),
        (failure(exit_code=3), SPECS_NEVER, "user", "ExitCode"),
        (failure(exit_code=3), SPECS_EXITCODE, "user", "ExitCode"),
        (failure(exit_code=130), SPECS_EXITCODE, "infrastructure", "RetryableExitCode"),
    ],
)
def test_a_replica_s_evidence_gives_its_cause(
    evidence: dict[str, Any], specs: dict[str, Any], category: str, reason: str
) -> None:
    cause = replica_cause(evidence, specs)
    assert cause is not None
    assert (cause.category, cause.reason) == (category, reason), cause
    assert cause.replica == "worker-1" and cause.replica_type == "Worker"


def test_a_signal_under_a_never_restart_policy_says_nothing_certain() -> None:
    assert replica_cause(failure(exit_code=137), SPECS_NEVER) is None
    assert classify("failed", [failure(exit_code=137)], SPECS_NEVER, "job failed").category == "unknown"


def test_the_traceback_s_exception_line_is_named() -> None:
    cause = replica_cause(failure(last_lines=TRACEBACK), SPECS_NEVER)
    assert cause is not None
    assert cause.summary == "worker-1 raised ValueError: learning rate must be positive"


def test_an_oom_names_the_replica_and_its_limit() -> None:
    cause = replica_cause(failure(reason="OOMKilled", exit_code=137, memory_limit="128Mi"), SPECS_NEVER)
    assert cause is not None
    assert cause.summary == "worker-1 was killed for running out of memory at its memory limit 128Mi"
    assert cause.memory_limit == "128Mi"


def test_the_cluster_s_doing_speaks_for_the_job_over_the_echoes_in_other_replicas() -> None:
    lost = failure(replica="worker-0", exit_code=None, reason="Deleted", deleted=True)
    echo = failure(
        replica="worker-1",
        exit_code=1,
        last_lines=["Traceback (most recent call last):", "OSError: peer gone"],
    )
    assert classify("failed", [echo, lost], SPECS_NEVER).reason == "PodDeleted"


@pytest.mark.parametrize(
    ("event", "category", "reason"),
    [
        ("preempted", "infrastructure", "Preempted"),
        ("kueue_ignored", "user", "KueueIgnored"),
        ("kueue_inadmissible", "user", "KueueInadmissible"),
        ("queue_timeout", "unknown", "Unknown"),
        ("startup_timeout", "unknown", "Unknown"),
    ],
)
def test_kueue_and_clock_events_give_their_cause(event: str, category: str, reason: str) -> None:
    cause = classify(event, message="Kueue said so")
    assert (cause.category, cause.reason) == (category, reason)


def test_a_cause_travels_as_json_and_its_exception_pickles() -> None:
    cause = classify("failed", [failure(reason="OOMKilled", exit_code=137, memory_limit="1Gi")], SPECS_NEVER)
    assert FailureCause.from_dict(cause.to_dict()) == cause
    error = pickle.loads(pickle.dumps(TrainingJobFailed("TFJob default/x failed", cause)))
    assert isinstance(error, AirflowException) and str(error) == "TFJob default/x failed"
    assert error.cause == cause


def test_the_outcome_carries_the_diagnoses_through_a_trigger_event() -> None:
    outcome = FollowOutcome("failed", failures=[failure()])
    assert FollowOutcome.from_dict(outcome.to_dict()).failures == [failure()]


# ---------------------------------------------------------------- pods as the cluster reports them


def pod(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "job-worker-0",
            "labels": {
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": "0",
                "training.kubeflow.org/job-name": "job",
            },
        },
        "spec": {"containers": [{"name": "tensorflow", "resources": {"limits": {"memory": "256Mi"}}}]},
        "status": status,
    }


def test_the_diagnosis_reads_an_oom_kill_and_the_container_s_limit() -> None:
    oom = pod(
        phase="Failed",
        containerStatuses=[
            {"name": "tensorflow", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
        ],
    )
    (found,) = diagnostics.diagnose("job", [oom], [], {})
    assert (found.reason, found.exit_code, found.memory_limit, found.replica_type) == (
        "OOMKilled",
        137,
        "256Mi",
        "worker",
    )


def test_the_diagnosis_reads_a_lost_node_s_pod() -> None:
    lost = pod(
        phase="Running",
        conditions=[
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint",
            }
        ],
    )
    lost["metadata"]["deletionTimestamp"] = "2026-12-02T07:00:00Z"
    (found,) = diagnostics.diagnose("job", [lost], [], {})
    assert (found.reason, found.disruption, found.deleted) == (
        "DeletionByTaintManager",
        "DeletionByTaintManager",
        True,
    )
    assert classify("failed", [found.to_dict()], SPECS_NEVER).reason == "NodeLost"


def test_a_replica_whose_pods_were_gone_before_the_follow_looked_is_told_by_their_events() -> None:
    """A deferred follow that started after the node was lost and its pods collected: the pods' events
    outlive them."""

    def event(reason: str, type_: str = "Normal") -> dict[str, Any]:
        return {
            "type": type_,
            "reason": reason,
            "message": "...",
            "involvedObject": {"kind": "Pod", "name": "job-worker-0"},
        }

    assert diagnostics.types_without_pods([], ["Worker"]) == ["Worker"]
    (found,) = diagnostics.diagnose(
        "job", [], [event("NodeNotReady", "Warning"), event("TaintManagerEviction")], {}, ["Worker"]
    )
    assert (found.replica, found.disruption) == ("worker replica(s)", "DeletionByTaintManager")
    cause = classify("failed", [found.to_dict()], SPECS_NEVER)
    assert (cause.reason, cause.replica_type) == ("NodeLost", "Worker")
    (quiet,) = diagnostics.diagnose("job", [], [event("Scheduled")], {}, ["Worker"])
    assert (
        quiet.disruption is None and classify("failed", [quiet.to_dict()], SPECS_NEVER).category == "unknown"
    )


def test_an_image_in_back_off_cannot_start_and_a_first_pull_error_may_still() -> None:
    waiting = {
        "name": "tensorflow",
        "state": {
            "waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "r.invalid/x:1"'}
        },
    }
    assert diagnostics.cannot_start([pod(phase="Pending", containerStatuses=[waiting])]) == [
        'job-worker-0: ImagePullBackOff: Back-off pulling image "r.invalid/x:1"'
    ]
    first = {
        "name": "tensorflow",
        "state": {"waiting": {"reason": "ErrImagePull", "message": "no such host"}},
    }
    assert diagnostics.cannot_start([pod(phase="Pending", containerStatuses=[first])]) == []


# ---------------------------------------------------------------- the decisions


class Store:
    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


class TI:
    def __init__(self) -> None:
        self.xcoms: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value


def failed(cause: FailureCause) -> TrainingJobFailed:
    return TrainingJobFailed("TFJob default/job failed", cause)


def decide(
    policy: TrainingRetryPolicy, error: BaseException, try_number: int = 1, max_tries: int = 3
) -> tuple[Any, TI, Store]:
    ti, store = TI(), Store()
    decision = policy.evaluate(error, try_number, max_tries, {"ti": ti, "task_state_store": store})  # type: ignore[arg-type]
    return decision, ti, store


def test_infrastructure_is_retried_after_the_cause_s_delay() -> None:
    cause = classify("failed", [failure(exit_code=None, reason="NodeLost")], SPECS_NEVER)
    decision, ti, _ = decide(TrainingRetryPolicy(), failed(cause))
    assert decision.action is RetryAction.RETRY and decision.retry_delay == timedelta(seconds=30)
    assert decision.reason.startswith(
        "TrainingRetryPolicy: infrastructure (NodeLost): worker-1: its node was lost"
    )
    assert decision.reason.endswith("-> retry in 30 s (try 1 of 4)")
    assert "\n" not in decision.reason
    assert (
        ti.xcoms[XCOM_DECISION]["action"] == "retry"
        and ti.xcoms[XCOM_DECISION]["cause"]["reason"] == "NodeLost"
    )


def test_a_lost_multikueue_worker_is_retried_as_a_lost_node_is() -> None:
    """A job whose MultiKueue worker cluster was lost while it ran (integrations/kueue/multikueue.py):
    infrastructure, retried after NodeLost's delay, or the one ``delays`` gives it."""
    cause = classify("worker_lost", message="worker cluster worker1 lost (MultiKueueCluster worker1 Active=False)")
    decision, _, _ = decide(TrainingRetryPolicy(), failed(cause))
    assert decision.action is RetryAction.RETRY and decision.retry_delay == timedelta(seconds=30)
    assert decision.reason.startswith("TrainingRetryPolicy: infrastructure (WorkerLost): worker cluster worker1 lost")
    decision, _, _ = decide(TrainingRetryPolicy(delays={"WorkerLost": 300}), failed(cause))
    assert decision.retry_delay == timedelta(seconds=300)


def test_delays_override_the_cause_s_delay() -> None:
    decision, _, _ = decide(TrainingRetryPolicy(delays={"Preempted": 0}), failed(classify("preempted")))
    assert decision.action is RetryAction.RETRY and decision.retry_delay == timedelta(0)


def test_the_user_s_failure_fails_at_once_naming_why() -> None:
    cause = classify("failed", [failure(last_lines=TRACEBACK)], SPECS_NEVER)
    decision, ti, store = decide(TrainingRetryPolicy(), failed(cause))
    assert decision.action is RetryAction.FAIL
    assert (
        "the job's own failure (Traceback): worker-1 raised ValueError: learning rate must be positive"
        in decision.reason
    )
    assert ti.xcoms[XCOM_DECISION]["action"] == "fail"
    assert store.values[STATE_KEY]["decisions"][0]["cause"]["reason"] == "Traceback"


def test_out_of_memory_fails_naming_the_replica_and_its_limit() -> None:
    cause = classify(
        "failed", [failure(reason="OOMKilled", exit_code=137, memory_limit="128Mi")], SPECS_NEVER
    )
    decision, _, store = decide(TrainingRetryPolicy(), failed(cause))
    assert decision.action is RetryAction.FAIL
    assert "worker-1 was killed for running out of memory at its memory limit 128Mi" in decision.reason
    assert "raise_memory=True" in decision.reason
    assert "memory" not in store.values[STATE_KEY]


def test_out_of_memory_opted_in_retries_with_a_raised_limit_up_to_the_ceiling() -> None:
    policy = TrainingRetryPolicy(raise_memory=True, memory_factor=3, memory_ceiling="1Gi")
    oom = failed(
        classify("failed", [failure(reason="OOMKilled", exit_code=137, memory_limit="128Mi")], SPECS_NEVER)
    )
    decision, ti, store = decide(policy, oom)
    assert decision.action is RetryAction.RETRY and decision.retry_delay == timedelta(0)
    assert "retry with Worker's memory limit raised to 384Mi" in decision.reason
    assert store.values[STATE_KEY]["memory"] == {"Worker": "384Mi"}
    assert ti.xcoms[XCOM_DECISION]["memory_limits"] == {"Worker": "384Mi"}
    near = failed(
        classify("failed", [failure(reason="OOMKilled", exit_code=137, memory_limit="512Mi")], SPECS_NEVER)
    )
    assert "raised to 1Gi" in decide(policy, near)[0].reason  # capped at the ceiling
    top = failed(
        classify("failed", [failure(reason="OOMKilled", exit_code=137, memory_limit="1Gi")], SPECS_NEVER)
    )
    decision = decide(policy, top)[0]
    assert decision.action is RetryAction.FAIL and "at memory_ceiling 1Gi" in decision.reason


def test_an_exception_that_is_not_the_provider_s_gets_the_default() -> None:
    decision, ti, _ = decide(TrainingRetryPolicy(), RuntimeError("boom"))
    assert decision.action is RetryAction.DEFAULT
    assert decision.reason == (
        "TrainingRetryPolicy: not a training job's failure (RuntimeError); the task's retries decide (try 1 of 4)"
    )
    assert ti.xcoms[XCOM_DECISION]["cause"] is None


def test_an_unreachable_api_is_infrastructure_wherever_it_was_raised() -> None:
    unreachable = ApiCallFailed("get tfjob default/x", 9, 240.0, ConnectionResetError())
    try:
        try:
            raise unreachable
        except ApiCallFailed as error:
            raise AirflowException("while following") from error
    except AirflowException as wrapped:
        cause = cause_of(wrapped)
    assert cause is not None and (cause.category, cause.reason) == ("infrastructure", "ApiUnavailable")
    assert cause.retry_after == 120.0


def test_bad_input_and_a_refused_spec_are_the_user_s() -> None:
    cause = cause_of(JobValidationError("worker", "must be a positive integer", "worker=2"))
    assert cause is not None and (cause.category, cause.reason) == ("user", "InvalidSpec")
    invalid = ApiException(status=422, reason="Unprocessable Entity")
    invalid.body = '{"kind": "Status", "message": "TFJob.kubeflow.org \\"x\\" is invalid: spec.tfReplicaSpecs: Required value"}'
    error = refusal(invalid, None, "submitting TFJob default/x")
    assert isinstance(error, TrainingJobFailed)
    assert str(error) == (
        'The cluster refused submitting TFJob default/x (422): TFJob.kubeflow.org "x" is invalid: '
        "spec.tfReplicaSpecs: Required value"
    )
    assert (error.cause.category, error.cause.reason) == ("user", "InvalidSpec")
    assert refusal(ApiException(status=500, reason="x"), None, "submitting") is None


def test_no_tries_left_is_said() -> None:
    decision, _, _ = decide(TrainingRetryPolicy(), failed(classify("preempted")), try_number=4, max_tries=3)
    assert decision.action is RetryAction.RETRY and "no tries are left (try 4 of 4)" in decision.reason


def test_the_policy_round_trips_through_its_serialized_form() -> None:
    policy = TrainingRetryPolicy(
        raise_memory=True, memory_factor=1.5, memory_ceiling="32Gi", delays={"NodeLost": 5}
    )
    data = policy.serialize()
    assert data["__type"] == "airflow_tfjob.operators.retry_policy.TrainingRetryPolicy"
    assert TrainingRetryPolicy.deserialize(data) == policy
    assert TrainingRetryPolicy.deserialize(TrainingRetryPolicy().serialize()) == TrainingRetryPolicy()


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"memory_factor": 1}, "memory_factor=1"),
        ({"memory_ceiling": "lots"}, "memory_ceiling='lots'"),
        ({"delays": {"Rain": 3}}, "unknown reason(s) ['Rain']"),
        ({"delays": {"NodeLost": -1}}, "delays['NodeLost']=-1"),
        ({"raise_memory": "yes"}, "raise_memory must be True or False"),
    ],
)
def test_bad_policy_parameters_are_named(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises((ValueError, TypeError), match=None) as raised:
        TrainingRetryPolicy(**kwargs)
    assert says in str(raised.value)


def test_memory_is_written_as_a_person_would() -> None:
    from decimal import Decimal

    assert memory_text(Decimal(2 << 30)) == "2Gi"
    assert memory_text(Decimal(384 << 20)) == "384Mi"
    assert memory_text(Decimal(100_000_001)) == "96Mi"


# ---------------------------------------------------------------- what the next try reads


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args)


def test_the_next_try_applies_the_raised_limit_and_pushes_the_decisions() -> None:
    store, ti, log = Store(), TI(), Log()
    store.set(STATE_KEY, {"memory": {"Worker": "256Mi"}, "decisions": [{"action": "retry"}]})
    manifest = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "x"},
        "spec": {
            "tfReplicaSpecs": {
                "Worker": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "resources": {
                                        "requests": {"memory": "64Mi"},
                                        "limits": {"memory": "128Mi"},
                                    },
                                }
                            ]
                        }
                    }
                }
            }
        },
    }
    apply_to_manifest(manifest, {"ti": ti, "task_state_store": store}, log)
    container = manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"memory": "64Mi"}, "limits": {"memory": "256Mi"}}
    assert log.lines == [
        "Retry policy: Worker's memory limit is 256Mi on this try (raised after an OOM kill)"
    ]
    assert ti.xcoms[XCOM_HISTORY] == [{"action": "retry"}]


def test_a_trainjob_s_raised_limit_is_its_trainer_s() -> None:
    store = Store()
    store.set(STATE_KEY, {"memory": {"Node": "2Gi"}})
    manifest: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "x"},
        "spec": {"trainer": {"numNodes": 2}},
    }
    apply_to_manifest(manifest, {"task_state_store": store}, Log())
    assert manifest["spec"]["trainer"]["resourcesPerNode"] == {"limits": {"memory": "2Gi"}}


# ---------------------------------------------------------------- on every operator and decorator


def test_every_operator_and_decorator_takes_the_policy_and_the_dag_serializes() -> None:
    from airflow.sdk import DAG, task
    from airflow_compat import dag_serialization

    DagSerialization = dag_serialization()

    from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator
    from airflow_tfjob.operators.tfjob import TFJobOperator
    from airflow_tfjob.operators.trainjob import TrainJobOperator

    policy = TrainingRetryPolicy(raise_memory=True)
    with DAG("retry_policy_everywhere", schedule=None) as dag:
        TFJobOperator(task_id="tf", worker=1, image="i", command=["c"], retries=3, retry_policy=policy)
        PyTorchJobOperator(task_id="pt", master=1, image="i", command=["c"], retry_policy=policy)
        TrainJobOperator(task_id="tj", image="i", command=["c"], runtime="torch-distributed", retry_policy=policy)
        TFJobOperator.partial(task_id="mapped", worker=1, image="i", retry_policy=policy).expand(
            command=[["a"], ["b"]]
        )

        @task.tfjob(worker=1, image="i", retry_policy=policy)
        def train_tf() -> int:
            return 1

        @task.pytorchjob(master=1, image="i", retry_policy=policy)
        def train_pt() -> int:
            return 1

        train_tf()
        train_pt()
    serialized = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    if not AIRFLOW_V_3_3_PLUS:
        # Below 3.3 the operator holds it itself (retry_fallback), and a mapped task gets it when unmapped.
        for task_id in ("tf", "pt", "tj", "train_tf", "train_pt"):
            assert dag.get_task(task_id).retry_policy is policy, task_id
        assert dag.get_task("mapped").partial_kwargs["retry_policy"] is policy
        return
    for task_id in ("tf", "pt", "tj", "mapped", "train_tf", "train_pt"):
        assert dag.get_task(task_id).retry_policy is policy, task_id
    # Airflow 3.3 keeps a flag in the serialized DAG; the worker's parse of the DAG file holds the policy.
    assert all(serialized.get_task(t).has_retry_policy for t in ("tf", "pt", "tj", "train_tf", "train_pt"))
    assert serialized.get_task("mapped").has_retry_policy
