"""``retry_policy=`` where Airflow has no retry policies (before 3.3): the operator applies what it can,
and the features a release lacks are named in one line. Pure: the release is a parameter here, so
every branch runs on every release the compatibility lane installs."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from airflow_compat import AirflowFailException
from packaging.version import Version

from airflow_tfjob import version_compat
from airflow_tfjob.follow.failure import TrainingJobFailed, infrastructure, user
from airflow_tfjob.operators import retry_fallback
from airflow_tfjob.operators.retry_policy import TrainingRetryPolicy


class _TI:
    try_number = 1
    max_tries = 3


class _Operator:
    log = logging.getLogger("test_retry_fallback")

    def __init__(self, policy: Any, error: BaseException | None) -> None:
        self.retry_policy = policy
        self.error = error

    @retry_fallback.fail_fast
    def execute(self, context: Any) -> str:
        if self.error is not None:
            raise self.error
        return "done"

    @retry_fallback.fail_fast
    def resume_execution(self, next_method: str, next_kwargs: Any, context: Any) -> str:
        return self.execute(context)


@pytest.fixture
def below_3_3(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's side as it runs before Airflow 3.3, whatever release is installed."""
    monkeypatch.setattr(retry_fallback, "AIRFLOW_V_3_3_PLUS", False)


def _failed(cause: Any) -> TrainingJobFailed:
    return TrainingJobFailed("TFJob default/j failed", cause)


@pytest.mark.usefixtures("below_3_3")
def test_the_jobs_own_failure_fails_without_a_retry_and_says_why() -> None:
    error = _failed(user("Traceback", "replica worker-0 raised ValueError"))
    with pytest.raises(AirflowFailException) as raised:
        _Operator(TrainingRetryPolicy(), error).execute({"ti": _TI()})
    assert raised.value.__cause__ is error
    assert "fail now" in str(raised.value) and "ValueError" in str(raised.value)


@pytest.mark.usefixtures("below_3_3")
def test_the_clusters_failure_is_raised_as_it_came_for_retries_to_decide() -> None:
    error = _failed(infrastructure("Preempted", "the job was preempted"))
    with pytest.raises(TrainingJobFailed) as raised:
        _Operator(TrainingRetryPolicy(), error).execute({"ti": _TI()})
    assert raised.value is error


@pytest.mark.usefixtures("below_3_3")
def test_an_error_that_is_not_the_providers_and_a_task_without_a_policy_are_untouched() -> None:
    with pytest.raises(KeyError):
        _Operator(TrainingRetryPolicy(), KeyError("x")).execute({"ti": _TI()})
    error = _failed(user("Traceback", "boom"))
    with pytest.raises(TrainingJobFailed):
        _Operator(None, error).execute({"ti": _TI()})
    assert _Operator(TrainingRetryPolicy(), None).execute({"ti": _TI()}) == "done"


@pytest.mark.usefixtures("below_3_3")
def test_the_resumed_task_is_held_to_the_same_policy() -> None:
    error = _failed(user("ExitCode", "exit code 1, not retryable"))
    with pytest.raises(AirflowFailException):
        _Operator(TrainingRetryPolicy(), error).resume_execution("execute_complete", {}, context={"ti": _TI()})


@pytest.mark.parametrize("release", ["3.2.2", "3.3.0"])
def test_the_policy_goes_to_airflow_from_3_3_and_stays_with_the_operator_before(
    monkeypatch: pytest.MonkeyPatch, release: str
) -> None:
    from_3_3 = Version(release) >= Version("3.3")
    monkeypatch.setattr(retry_fallback, "AIRFLOW_V_3_3_PLUS", from_3_3)
    policy = TrainingRetryPolicy()
    assert retry_fallback.passed_on(policy) == ({"retry_policy": policy} if from_3_3 else {})
    assert retry_fallback.passed_on(None) == {}
    # From 3.3 Airflow's task runner applies it: the operator leaves a job's own failure as it came.
    error = _failed(user("Traceback", "boom"))
    expected = TrainingJobFailed if from_3_3 else AirflowFailException
    with pytest.raises(expected):
        _Operator(policy, error).execute({"ti": _TI()})


def test_a_class_or_another_object_as_the_policy_is_refused_at_parse() -> None:
    from airflow_tfjob.build.checker import JobValidationError
    from airflow_tfjob.operators.tfjob import TFJobOperator

    for wrong, words in ((TrainingRetryPolicy, "TrainingRetryPolicy()"), ("retry", "TrainingRetryPolicy()")):
        with pytest.raises(JobValidationError) as raised:
            TFJobOperator(task_id="t", worker=1, image="i", retry_policy=wrong)
        assert "retry_policy" in str(raised.value) and words in str(raised.value)


def test_the_missing_features_line_names_each_with_its_release_and_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(version_compat, "AIRFLOW_VERSION", Version("3.0.6"))
    line = version_compat.missing_features("retry_policy", "task_state_store", "trigger_on_kill")
    assert line is not None and "3 feature(s)" in line
    for name in ("retry_policy (Airflow 3.3+)", "task_state_store (Airflow 3.3+)", "trigger_on_kill (Airflow 3.3+)"):
        assert name in line
    assert "identity labels" in line and "reading the task's state" in line
    monkeypatch.setattr(version_compat, "AIRFLOW_VERSION", Version("3.3.2"))
    assert version_compat.missing_features("retry_policy", "task_state_store", "trigger_on_kill") is None


def test_the_flags_follow_the_installed_release() -> None:
    from airflow.version import version

    installed = Version(Version(version).base_version)
    assert version_compat.AIRFLOW_VERSION == installed
    assert version_compat.AIRFLOW_V_3_1_PLUS is (installed >= Version("3.1"))
    assert version_compat.AIRFLOW_V_3_2_PLUS is (installed >= Version("3.2"))
    assert version_compat.AIRFLOW_V_3_3_PLUS is (installed >= Version("3.3"))
