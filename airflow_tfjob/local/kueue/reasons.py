"""The reasons a pending Workload's ``QuotaReserved=False`` condition carries, as the profile's Kueue writes
them (pkg/workload/workload.go ``UnadmittedWorkloadReasonWithFallback``, apis/kueue/v1beta2/workload_types.go).

Kueue computes a granular reason everywhere it leaves a Workload unadmitted and writes it only when the
``UnadmittedWorkloadsObservability`` gate is on; with the gate off it writes the old fallback
(``Inadmissible`` for the queue blockers, ``Pending`` for the scheduler's verdicts). The gate is off by
default in v0.19 and on in v0.20 (kubernetes-sigs/kueue#13063): one switch, read from the version profile,
decides which word the local cluster writes, so the emulation keeps one code path per situation.

Read at kubernetes-sigs/kueue main ff69552e79 (v0.20.0-devel-377, after #13063 at 24698d2c36; v0.20.0 was
not tagged in the stored snapshot) and compared with v0.19.2, which computes the same granular reasons.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The fallbacks (what v0.19's default gates write).
INADMISSIBLE = "Inadmissible"
PENDING = "Pending"

#: The granular reasons (workload_types.go, WorkloadQuotaReservedReason*).
WAITING_FOR_QUOTA = "WaitingForQuota"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
NO_MATCHING_FLAVOR = "NoMatchingFlavor"
WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"
MISCONFIGURED = "Misconfigured"
SUSPENDED = "Suspended"
PENDING_EVALUATION = "PendingEvaluation"

#: The Admitted=False condition of a Workload without a reservation (pkg/workload/admissionchecks.go
#: SyncAdmittedCondition): written for every pending Workload when the gate is on, on a change only when off.
NO_RESERVATION = ("NoReservation", "The workload has no reservation")

#: flavorassigner.go reasonSeverity: of two reasons for not fitting, the more severe is told.
_SEVERITY = {WAITING_FOR_QUOTA: 1, EXCEEDS_MAX_QUOTA: 2, NO_MATCHING_FLAVOR: 3}


def most_severe(a: str, b: str) -> str:
    """mostSevereReason: ``a`` when at least as severe as ``b`` (an empty reason is the least)."""
    return a if _SEVERITY.get(a, 0) >= _SEVERITY.get(b, 0) else b


def least_severe(reasons: list[str]) -> str:
    """Among a resource group's flavors (alternatives), the blocker the best of them meets."""
    return min(reasons, key=lambda r: _SEVERITY.get(r, 0)) if reasons else NO_MATCHING_FLAVOR


@dataclass(frozen=True)
class Reasons:
    """``granular``: the profile's Kueue has UnadmittedWorkloadsObservability on (0.20's default)."""

    granular: bool = False

    def pick(self, granular: str, fallback: str) -> str:
        """UnadmittedWorkloadReasonWithFallback."""
        return granular if self.granular else fallback
