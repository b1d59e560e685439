"""The preflight's ReplicatedJob name rule (issue 38, item 3) against a cluster that answers from a table:
the names over the limit are told with their length, by the runtime's kind, and the verdict follows the
release Trainer's install records (unknown: a warning, since nothing is refused yet for certain)."""

from __future__ import annotations

from typing import Any

from airflow_tfjob.jobs.kinds import TRAINJOB
from airflow_tfjob.preflight import checks, needs
from airflow_tfjob.preflight.needs import Target


class Cluster:
    """Answers find_object from {(plural, name): object}; every API served, every verb allowed."""

    def __init__(self, objects: dict[tuple[str, str], dict]) -> None:
        self.objects = objects

    def served_resources(self, group_version: str) -> set[str] | None:
        return {"trainjobs", "clustertrainingruntimes", "trainingruntimes", "jobsets"}

    def api_group(self, group: str) -> dict | None:
        return {"name": group, "versions": [{"version": "v1alpha1"}]}

    def find_object(self, api_version: str, plural: str, name: str, namespace: str | None = None) -> dict | None:
        return self.objects.get((plural, name))

    def access_review(self, verb: str, group: str, resource: str, namespace: str | None = None, *,
                      cluster_scoped: bool = False) -> bool:
        return True


def runtime(*names: str) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"replicatedJobs": [{"name": n} for n in names]}}}}


def trainer(release: str) -> dict[str, Any]:
    return {"data": {needs.TRAINER_VERSION_CONFIG[2]: release}}


def rows(release: str, kind: str = "TrainingRuntime") -> list[checks.Finding]:
    plural = needs.RUNTIME_PLURALS[kind]
    cluster = Cluster({(plural, "rt"): runtime("node", "x" * 20, "y" * 25),
                       ("configmaps", needs.TRAINER_VERSION_CONFIG[1]): trainer(release)})
    report = checks.check(cluster, "ns", [Target(TRAINJOB, "rt", runtime_kind=kind)])
    return [f for f in report.findings if "ReplicatedJob names" in f.part]


def test_only_names_over_the_limit_are_told_and_the_release_decides_the_verdict() -> None:
    (refused,) = rows("v2.5.0")
    assert (refused.part, refused.status) == ("TrainingRuntime rt: ReplicatedJob names", "MISSING")
    assert refused.there == f"{'y' * 25} (25) over 20 characters; Trainer v2.5.0"  # 20 fits
    assert "kubectl edit trainingruntimes rt" in refused.fix
    (unknown,) = rows("main", "ClusterTrainingRuntime")
    assert unknown.status == "warning" and "Trainer of an unknown release" in unknown.there
    assert "will be refused after upgrading to Trainer 2.4" in unknown.missing


def test_the_providers_runtimes_fit_trainer_24s_name_limit() -> None:
    """The TensorFlow runtimes `tfjob-runtimes install` writes pass the rule they are checked by."""
    from importlib import resources

    import yaml

    from airflow_tfjob.jobs.trainjob import runtimes

    (_since, limit) = needs.APIS[needs.TRAINER_API].replicated_job_name_limit or ((0, 0), 0)
    files = [f for f in resources.files(runtimes).iterdir() if f.name.endswith(".yaml")]
    names = [n for f in files for n in needs.replicated_job_names(yaml.safe_load(f.read_text()))]
    assert len(files) == 3 and names and max(map(len, names)) <= limit == 20, names
