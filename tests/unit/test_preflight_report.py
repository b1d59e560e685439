"""The preflight's pure parts: the report (rows, status, table, summary, exit status), what each API and
the Role need (preflight/needs.py), a target read from a manifest or from a DAG's operator."""

from __future__ import annotations

import pytest

from airflow_tfjob.jobs.kinds import PYTORCHJOB, TFJOB, TRAINJOB
from airflow_tfjob.preflight import needs
from airflow_tfjob.preflight.needs import Target
from airflow_tfjob.preflight.report import EXIT_MISSING, EXIT_OK, Finding, Report


def test_a_report_is_ok_unless_a_blocking_part_is_missing() -> None:
    there = Finding("TFJob (kubeflow.org/v1)", "served")
    warning = Finding("verb: create pods", "denied", "create pods", "grant it", blocking=False)
    missing = Finding(
        "ClusterTrainingRuntime tensorflow-distributed", "not found", "the runtime", "tfjob-runtimes install"
    )
    assert Report.of([there, warning]).ok and Report.of([there, warning]).exit_status == EXIT_OK
    report = Report.of([there, warning, missing, missing])
    assert not report.ok and report.exit_status == EXIT_MISSING
    assert report.findings == (there, warning, missing)  # one row per part
    assert [f.status for f in report.findings] == ["ok", "warning", "MISSING"]
    assert report.summary() == "1 of 3 parts missing: a job cannot run (1 warning(s))"


def test_the_table_aligns_columns_and_shows_dashes_for_nothing() -> None:
    report = Report.of([Finding("A", "there"), Finding("Longer part", "x", "gone", "fix it")])
    lines = report.table().splitlines()
    assert lines[0].split() == ["PART", "STATUS", "THERE", "MISSING", "FIX"]
    assert lines[1].split() == ["A", "ok", "there", "-", "-"]
    assert lines[2].index("MISSING") == lines[0].index("STATUS")
    assert report.table(only_missing=True).splitlines()[1].startswith("Longer part")


def test_a_target_from_a_manifest() -> None:
    trainjob = {
        "kind": "TrainJob",
        "metadata": {"name": "j", "labels": {needs.QUEUE_LABEL: "team-a"}},
        "spec": {"runtimeRef": {"name": "tensorflow-distributed", "kind": "ClusterTrainingRuntime"}},
    }
    assert Target.of_manifest(trainjob) == Target(TRAINJOB, "tensorflow-distributed", queue="team-a")
    assert Target.of_manifest({"kind": "TFJob", "metadata": {"name": "j"}}) == Target(TFJOB)


def test_kueue_frameworks_are_read_from_the_manager_config() -> None:
    config = {
        "data": {
            needs.KUEUE_CONFIG[2]: "integrations:\n  frameworks:\n  - batch/job\n  - kubeflow.org/tfjob\n"
        }
    }
    assert needs.frameworks_of(config) == ["batch/job", "kubeflow.org/tfjob"]
    assert needs.frameworks_of({"data": {needs.KUEUE_CONFIG[2]: "namespace: kueue-system\n"}}) is None
    assert needs.frameworks_of({"data": {needs.KUEUE_CONFIG[2]: ": ["}}) is None
    assert '"- kubeflow.org/pytorchjob" under integrations.frameworks' in needs.integration_fix(PYTORCHJOB)


def test_the_role_verbs_a_target_uses() -> None:
    grants = {str(g) for g in needs.grants_for((Target(TFJOB),))}
    assert {"create tfjobs.kubeflow.org", "delete pods", "get pods/log", "list events"} <= grants
    assert not any("pytorchjobs" in g or "trainjobs" in g or "kueue" in g for g in grants)
    queued = {str(g) for g in needs.grants_for((Target(PYTORCHJOB, queue="q"),))}
    assert "list workloads.kueue.x-k8s.io" in queued and "create pytorchjobs.kubeflow.org" in queued
    optional = {str(g) for g in needs.role_grants() if g.optional_for}
    assert optional == {
        "create pods",
        "create services",
        "get services",
        "get localqueues/pendingworkloads.visibility.kueue.x-k8s.io",
    }


@pytest.mark.parametrize(
    ("runtime", "fix"), [("tensorflow-ps", "tfjob-runtimes install"), ("mine", "'mine'")]
)
def test_the_runtime_fix_names_the_provider_install_for_its_own_runtimes(runtime: str, fix: str) -> None:
    assert fix in needs.runtime_fix(runtime, "ClusterTrainingRuntime")


def test_a_tfjob_run_as_a_trainjob_lands_on_the_runtime_of_its_replica_types() -> None:
    from airflow_tfjob.operators.tfjob import TFJobOperator

    op = TFJobOperator(
        task_id="t", image="i", command=["c"], chief=1, worker=2, api="trainjob", kueue_queue="q"
    )
    assert needs.target_of_task(op) == Target(TRAINJOB, "tensorflow-chief", queue="q", source="t")
    plain = TFJobOperator(task_id="p", image="i", command=["c"], api="tfjob")
    assert needs.target_of_task(plain) == Target(TFJOB, source="p")
