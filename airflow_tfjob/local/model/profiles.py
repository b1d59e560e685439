"""Version profiles: what differs between the upstream releases the local cluster can stand for.

A :class:`Profile` names one release of each upstream (Kueue, Kubeflow Trainer, training-operator v1);
``tfjob-local serve --profile kueue=0.20,trainer=2.4`` and ``LocalCluster(profile=...)`` pick one. The
default, ``kueue=0.19,trainer=2.3`` (training-operator 1.9.4 always), is the cluster as it has always
been.

Each :class:`Release` is a small table: the API versions it serves, the feature gates whose default
matters to the provider, and rows (:class:`Row`), one per difference, each citing where upstream states it
(a pull request, an issue, or a file at a tag) and saying how far that was checked. ``emulated`` marks
the rows the local cluster acts on under the profile; the others are recorded for the steps that will
(docs/local-cluster.md, "Version profiles", shows the table).

Pure data, as everything in model/: the cluster's assembly reads :meth:`Profile.withdrawn` and hands the
API server the group/versions it must answer 404 for, and hands a Trainer release's :class:`TrainerRules`
to Trainer's admission (the ReplicatedJob name limit) and its TrainJob controller (the MPI node image).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

KUEUE = "kueue"
TRAINER = "trainer"
TRAINING_OPERATOR = "training-operator"
#: Where a row stands: checked against upstream's source at a tag or a merged change, or not.
CONFIRMED = "confirmed"
#: Kueue's gate that decides which QuotaReserved=False reasons a pending Workload carries.
UNADMITTED_OBSERVABILITY = "UnadmittedWorkloadsObservability"


@dataclass(frozen=True)
class Row:
    """One way a release differs: which part (served versions, feature gates, integrations, webhook,
    controller), what it does, where upstream says so, how far that was checked (``CONFIRMED`` or the
    caveat), and whether the local cluster emulates it under the profile."""

    part: str
    says: str
    source: str
    checked: str = CONFIRMED
    emulated: bool = False


#: The caveat of every Trainer 2.4 row the local cluster acts on from the release notes alone.
RELEASE_NOTES_ONLY = "release notes as quoted in issue 38; source not in the stored snapshot"


@dataclass(frozen=True)
class TrainerRules:
    """What the local Trainer does differently under a release: the runtime webhook's limit on a
    ReplicatedJob name (None: no limit of its own), whether the TrainJob's `spec.trainer.image` reaches
    an MPI runtime's `node` job as well as its launcher, and whether an OpenMPI launcher gets Open MPI 5's
    PRTE variables beside the ORTE ones (reserved as they are). Read by the admission and the TrainJob
    controller."""

    replicated_job_name_max: int | None = None
    image_on_mpi_nodes: bool = False
    prte_env: bool = False


@dataclass(frozen=True, eq=False)
class Release:
    """One upstream release as a profile names it (``version``, e.g. "0.20") and the tag it stands for.
    Each exists once, in the tables below: two are equal when they are the same one."""

    project: str
    version: str
    tag: str
    #: API group -> the versions served, the preferred (storage) one first.
    served: Mapping[str, tuple[str, ...]]
    #: Feature gates whose default the provider sees (gate -> default).
    gates: Mapping[str, bool] = field(default_factory=dict)
    rows: tuple[Row, ...] = ()
    #: Trainer releases only: the rules the local Trainer enforces (the default: v2.3.0's).
    trainer_rules: TrainerRules = TrainerRules()

    def __post_init__(self) -> None:
        object.__setattr__(self, "served", MappingProxyType(dict(self.served)))
        object.__setattr__(self, "gates", MappingProxyType(dict(self.gates)))

    @property
    def name(self) -> str:
        return f"{self.project} {self.version}"


_KUEUE_REASONS = ("WaitingForQuota", "NoMatchingFlavor", "ExceedsMaxQuota", "TopologyPlacementFailed",
                  "WaitingForPreemptedWorkloads", "WaitingForPodsReady", "PendingEvaluation", "Misconfigured",
                  "Suspended")
_V1_OFF = Row(
    "integrations",
    "the five kubeflow.org/v1 kinds' integrations (tfjob, pytorchjob, xgboostjob, jaxjob, paddlejob) are "
    "commented out of the shipped integrations.frameworks; trainer.kubeflow.org/trainjob and "
    "kubeflow.org/mpijob stay on",
    "kubernetes-sigs/kueue#12606, in v0.19.0 (config/components/manager/controller_manager_config.yaml at "
    "v0.19.0 and v0.19.2); dropping them is tracked in kubernetes-sigs/kueue#12620 (open)",
    "confirmed; issue 38 cites #12620, which is the deprecation issue: the change itself is #12606",
    emulated=True,
)

KUEUE_0_19 = Release(
    KUEUE, "0.19", "v0.19.2",
    served={"kueue.x-k8s.io": ("v1beta2", "v1beta1"), "visibility.kueue.x-k8s.io": ("v1beta2", "v1beta1")},
    gates={UNADMITTED_OBSERVABILITY: False},
    rows=(
        Row("served API versions",
            "kueue.x-k8s.io v1beta2 (storage) and v1beta1 (deprecated: every request through it gets the "
            "CRD's deprecation warning); the visibility API at v1beta2 and v1beta1",
            "kubernetes-sigs/kueue v0.19.2: config/components/crd/bases/*.yaml (deprecationWarning on "
            "v1beta1), config/components/visibility/apiservice_v1beta1.yaml and apiservice_v1beta2.yaml",
            emulated=True),
        Row("default feature gates",
            "UnadmittedWorkloadsObservability is beta and off: a Workload waiting for quota or misconfigured "
            "carries QuotaReserved=False with the fallback reasons (Pending, Inadmissible)",
            "kubernetes-sigs/kueue v0.19.2: pkg/features/kube_features.go, "
            "pkg/workload/workload.go (UnadmittedWorkloadReasonWithFallback)",
            emulated=True),
        _V1_OFF,
        Row("integrations",
            "the TrainJob integration is built against Trainer v2.2.1 and writes spec.runtimePatches, a field "
            "Trainer has from v2.2: with Trainer v2.1 a queued TrainJob is never unsuspended",
            "kubernetes-sigs/kueue v0.19.2: go.mod, pkg/controller/jobs/trainjob/trainjob_controller.go; "
            "kubernetes-sigs/kueue#11931 (the v2.1 symptom)"),
    ),
)

KUEUE_0_20 = Release(
    KUEUE, "0.20", "v0.20.0",
    served={"kueue.x-k8s.io": ("v1beta2",), "visibility.kueue.x-k8s.io": ("v1beta2",)},
    gates={UNADMITTED_OBSERVABILITY: True},
    rows=(
        Row("served API versions",
            "kueue.x-k8s.io/v1beta1 is no longer served (its CRD versions set served: false), nor the "
            "visibility API's v1beta1 APIService: discovery lists v1beta2 only and a v1beta1 request is 404",
            "kubernetes-sigs/kueue#14558, read at its head 19754299e4: served: false on v1beta1 in every CRD "
            "of config/components/crd/bases (and the chart's), pkg/visibility/server.go no longer installs "
            "visibility v1beta1; its v1beta1 tests removed (e2e_v1beta1_test.go, "
            "conversion/conversions_v1beta1_test.go, webhook/core/workload_test.go's \"Workload v1beta1 CEL "
            "validation\" entries, visibility_test.go's v1beta1 case)",
            "confirmed in the change itself; the pull request was still open in the stored snapshot (main at "
            "ff69552e79, 2026-08-22): that v0.20.0 ships it is issue 38's reading of the release notes",
            emulated=True),
        Row("default feature gates",
            "UnadmittedWorkloadsObservability on by default: QuotaReserved=False carries the granular "
            "reasons " + ", ".join(_KUEUE_REASONS) + " instead of Pending/Inadmissible, and a Workload "
            "without a reservation also carries Admitted=False NoReservation (SyncAdmittedCondition; with the "
            "gate off, a Workload never admitted has no Admitted condition). Emulated: "
            "Misconfigured (LocalQueue or ClusterQueue missing; namespace not selected), Suspended (queue "
            "stopped or inactive), ExceedsMaxQuota (request above the ClusterQueue's quota), NoMatchingFlavor "
            "(taint, node labels, resource not covered), WaitingForQuota, WaitingForPreemptedWorkloads, and "
            "PendingEvaluation on the Workload requeued after an eviction; not emulated: WaitingForPodsReady "
            "(the local Kueue does not block admission on PodsReady), TopologyPlacementFailed (no TAS), "
            "PendingEvaluation on creation (UnadmittedWorkloadsExplicitStatus, off), Deactivated for a "
            "Workload with spec.active false and AdmissionGated (the local Kueue models neither)",
            "kubernetes-sigs/kueue#13063 (24698d2c36, pkg/features/kube_features.go); read at main ff69552e79 "
            "(v0.20.0-devel-377): apis/kueue/v1beta2/workload_types.go, pkg/workload/workload.go "
            "(UnadmittedWorkloadReasonWithFallback), pkg/workload/admissionchecks.go (SyncAdmittedCondition), "
            "pkg/controller/core/workload_controller.go (getQueueBlocker, "
            "resolveGranularUnadmittedQuotaReservedCondition), pkg/scheduler/scheduler.go (nominate, schedule, requeueAndUpdate), "
            "pkg/scheduler/flavorassigner/flavorassigner.go (fitsResourceQuota, resolveNoFitReason), "
            "pkg/controller/jobframework/reconciler.go",
            "confirmed in source at main after #13063 (no v0.20.0 tag in the stored snapshot); issue 38 names "
            "five of the nine reasons",
            emulated=True),
        _V1_OFF,
        Row("integrations",
            "the TrainJob integration is built and tested against Trainer v2.3.0, whose runtimePatches merge "
            "as a strategic merge patch (a patch naming a ReplicatedJob the runtime lacks now adds one); run "
            "it with Trainer 2.3 or later",
            "kubernetes-sigs/kueue#14504 (22553e5417, in main before v0.20.0): go.mod trainer v2.2.1 -> v2.3.0; "
            "pkg/controller/jobs/trainjob/trainjob_controller_test.go TestRunWithPodsetsInfo rewritten for "
            "v2.3.0's merge",
            "partly: #14504 is confirmed in main (the dependency and its unit test); a stated minimum is only "
            "proposed "
            "(kubernetes-sigs/kueue#14886 says v2.3.0, #14943 says v2.2.0, both open when read); the hard "
            "floor in code is runtimePatches, i.e. Trainer v2.2"),
    ),
)

#: Why no Trainer 2.4 row can be checked in source here.
_TRAINER_SNAPSHOT = ("the stored kubeflow/trainer ends at master 8c0f5059b (2026-08-21, #3959; no pull request "
                     "after #3964, no v2.4 tag), before the change")

TRAINER_2_3 = Release(
    TRAINER, "2.3", "v2.3.0",
    served={"trainer.kubeflow.org": ("v1alpha1",)},
    gates={"TrainJobStatus": False},
    rows=(
        Row("served API versions",
            "trainer.kubeflow.org/v1alpha1: TrainJob, TrainingRuntime, ClusterTrainingRuntime",
            "kubeflow/trainer v2.3.0: manifests/base/crds/", emulated=True),
        Row("default feature gates", "TrainJobStatus is alpha and off",
            "kubeflow/trainer v2.3.0: pkg/features/features.go", emulated=True),
        Row("webhook",
            "spec.runtimePatches may change in the same update that unsuspends a TrainJob (the old object's "
            "suspend is what counts): Kueue starts a job in one request",
            "kubeflow/trainer#3469, in v2.3.0"),
    ),
)

TRAINER_2_4 = Release(
    TRAINER, "2.4", "v2.4.0",
    served={"trainer.kubeflow.org": ("v1alpha1",)},
    gates={"TrainJobStatus": False},
    rows=(
        Row("served API versions", "trainer.kubeflow.org/v1alpha1, as in 2.3",
            "issue 38 names no API version change",
            "not confirmed: " + _TRAINER_SNAPSHOT, emulated=True),
        Row("default feature gates",
            "TrainJobStatus still off; its move to on by default (GA) is proposed", "kubeflow/trainer#3861",
            "partly: read at #3861's head 7461d27d1 (pkg/features/features.go: TrainJobStatus Default true, "
            "GA); open in the stored snapshot, whose master (8c0f5059b) still has it off, alpha; which "
            "release takes it is not known"),
        Row("webhook",
            "a runtime's ReplicatedJob names are at most 20 characters: the TrainingRuntime and "
            "ClusterTrainingRuntime webhooks refuse a longer one (403, a field error on "
            "spec.template.spec.replicatedJobs[i].name; the wording here is ours); a runtime labelled "
            "trainer.kubeflow.org/webhook-validation: disabled is not sent to them, as for every runtime rule",
            "kubeflow/trainer#4394", RELEASE_NOTES_ONLY + " (" + _TRAINER_SNAPSHOT + ")", emulated=True),
        Row("controller",
            "the TrainJob's spec.trainer.image is set on the MPI launcher and on the nodes (the node job's "
            "node container; 2.3 sets it on the launcher only)",
            "kubeflow/trainer#4301 (the bug: kubeflow/trainer#4030)",
            RELEASE_NOTES_ONLY + " (" + _TRAINER_SNAPSHOT + ")", emulated=True),
        Row("controller",
            "OpenMPI runtimes' launcher gets the PRTE_MCA_* variables (Open MPI 5) after the ORTE ones, with "
            "their values but one: PRTE_MCA_prte_default_hostfile, PRTE_MCA_prte_keep_fqdn_hostnames=false, "
            "PRTE_MCA_prte_set_default_slots, PRTE_MCA_plm_ssh_args; a TrainJob may not set them (reserved, as "
            "the ORTE ones)",
            "kubeflow/trainer#4029 (for kubeflow/trainer#4028)",
            "partly: read in #4029's thread (open on 2026-09-04: the four PRTE names beside the ORTE ones, "
            "\"mirrored\" but for prte_keep_fqdn_hostnames false, the names added to MPIReservedEnvNames); "
            "their order after the ORTE ones is ours; not in source: " + _TRAINER_SNAPSHOT + "; that v2.4.0 "
            "ships it is issue 38's word", emulated=True),
        Row("controller",
            "suspended MPI TrainJobs (DeepSpeed, MLX) created before the upgrade cannot resume after it",
            "issue 38 (v2.4.0's release notes)",
            RELEASE_NOTES_ONLY + "; not emulated: a profile is fixed for a cluster's life, so no TrainJob "
            "outlives an upgrade"),
    ),
    trainer_rules=TrainerRules(replicated_job_name_max=20, image_on_mpi_nodes=True, prte_env=True),
)

TRAINING_OPERATOR_1_9_4 = Release(
    TRAINING_OPERATOR, "1.9.4", "v1.9.4",
    served={"kubeflow.org": ("v1",)},
    rows=(
        Row("served API versions",
            "kubeflow.org/v1 TFJob, PyTorchJob, XGBoostJob, JAXJob, PaddleJob (its MPIJob v1 CRD is not "
            "emulated)",
            "kubeflow/trainer v1.9.4: manifests/base/crds/kustomization.yaml", emulated=True),
        Row("controller",
            "the last release of the v1 line (frozen); gone from Kubeflow's community distribution after "
            "26.03.1",
            "kubeflow/trainer v1.9.4 (#3947); kubeflow/community-distribution#3540 (merged July 2026)"),
    ),
)

#: Every release a profile can name, by project and version.
RELEASES: dict[str, dict[str, Release]] = {
    KUEUE: {r.version: r for r in (KUEUE_0_19, KUEUE_0_20)},
    TRAINER: {r.version: r for r in (TRAINER_2_3, TRAINER_2_4)},
    TRAINING_OPERATOR: {r.version: r for r in (TRAINING_OPERATOR_1_9_4,)},
}
_EXAMPLE = "kueue=0.20,trainer=2.4"


def _choices() -> str:
    return ", ".join(f"{project}={'|'.join(versions)}" for project, versions in RELEASES.items())


@dataclass(frozen=True)
class Profile:
    kueue: Release = KUEUE_0_19
    trainer: Release = TRAINER_2_3
    training_operator: Release = TRAINING_OPERATOR_1_9_4

    @property
    def releases(self) -> tuple[Release, ...]:
        return (self.kueue, self.trainer, self.training_operator)

    @property
    def name(self) -> str:
        """``kueue=0.20,trainer=2.4`` (training-operator has one release: left out)."""
        return f"{KUEUE}={self.kueue.version},{TRAINER}={self.trainer.version}"

    @property
    def is_default(self) -> bool:
        return self == Profile()

    @classmethod
    def parse(cls, text: str, option: str = "profile") -> Profile:
        """``kueue=0.20,trainer=2.4``: a release per project named, the default for the others. A bad
        value is a ValueError naming `option`, the part and the valid versions."""
        chosen: dict[str, Release] = {}
        parts = [p.strip() for p in str(text).split(",") if p.strip()]
        if not parts:
            raise ValueError(f"{option} {text!r}: empty; give PROJECT=VERSION pairs from {_choices()}, "
                             f"e.g. {_EXAMPLE}")
        for part in parts:
            project, sep, version = (s.strip() for s in part.partition("="))
            if not sep or project not in RELEASES:
                raise ValueError(f"{option} {part!r}: expected PROJECT=VERSION with PROJECT one of "
                                 f"{', '.join(RELEASES)}: {_choices()} (e.g. {_EXAMPLE})")
            if project in chosen:
                raise ValueError(f"{option} {text!r}: {project} is named twice; name it once")
            release = RELEASES[project].get(version)
            if release is None:
                raise ValueError(f"{option} {part!r}: no {project} {version or '(empty)'} profile; "
                                 f"{project} is one of {', '.join(RELEASES[project])} (e.g. {_EXAMPLE})")
            chosen[project] = release
        return cls(**{p.replace("-", "_"): r for p, r in chosen.items()})

    @classmethod
    def of(cls, value: str | Mapping[str, str] | Profile | None, option: str = "profile") -> Profile:
        """LocalCluster's `profile=` argument: None (the default), "kueue=0.20,trainer=2.4", a mapping
        such as {"kueue": "0.20"}, or a Profile."""
        if value is None:
            return cls()
        if isinstance(value, Profile):
            return value
        if isinstance(value, str):
            return cls.parse(value, option)
        if isinstance(value, Mapping):
            return cls.parse(",".join(f"{k}={v}" for k, v in value.items()), option)
        raise ValueError(f"{option} must be a string such as {_EXAMPLE!r}, a mapping such as "
                         f"{{'kueue': '0.20'}} or a Profile, got {value!r}")

    def serves(self, group: str) -> tuple[str, ...] | None:
        """The versions of `group` this profile's releases serve (None: no release describes it)."""
        for release in self.releases:
            if group in release.served:
                return release.served[group]
        return None

    def withdrawn(self) -> frozenset[str]:
        """``group/version`` that another release of the same project serves and this profile's does not:
        what the API server must not serve (empty for the default profile)."""
        out: set[str] = set()
        for release in self.releases:
            for other in RELEASES[release.project].values():
                for group, versions in other.served.items():
                    mine = release.served.get(group, ())
                    out.update(f"{group}/{v}" for v in versions if v not in mine)
        return frozenset(out)


DEFAULT_PROFILE = Profile()
