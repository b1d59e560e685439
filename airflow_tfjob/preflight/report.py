"""The preflight's report (pure): one row per part, what is there, what is missing, the fix; rendered as
one table, and the exit status the console script gives."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Exit statuses of tfjob-preflight: every job can run; a job cannot; the command was misused; the
#: cluster could not be asked (no kubeconfig, server down, refused).
EXIT_OK = 0
EXIT_MISSING = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


@dataclass(frozen=True)
class Finding:
    """One part a job needs and what the cluster has of it."""

    part: str
    there: str
    #: What is missing ("" when nothing is).
    missing: str = ""
    fix: str = ""
    #: Whether a job cannot run without the part (else a missing part is a warning: the job runs
    #: without what it gives, e.g. a TensorBoard or queue positions).
    blocking: bool = True

    @property
    def status(self) -> str:
        if not self.missing:
            return "ok"
        return "MISSING" if self.blocking else "warning"


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]

    @classmethod
    def of(cls, findings: Iterable[Finding]) -> Report:
        # The same part asked for two jobs is one row.
        return cls(tuple(dict.fromkeys(findings)))

    @property
    def ok(self) -> bool:
        """No blocking part is missing: every job checked can run."""
        return not self.blocking_missing

    @property
    def blocking_missing(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.missing and f.blocking)

    @property
    def exit_status(self) -> int:
        return EXIT_OK if self.ok else EXIT_MISSING

    def table(self, only_missing: bool = False) -> str:
        """The report as one plain-text table (the task log and a terminal show it alike)."""
        rows = [f for f in self.findings if f.missing] if only_missing else list(self.findings)
        return render(
            ("PART", "STATUS", "THERE", "MISSING", "FIX"),
            [(f.part, f.status, f.there, f.missing or "-", f.fix or "-") for f in rows],
        )

    def summary(self) -> str:
        """One line: how many parts, how many missing."""
        missing = self.blocking_missing
        warnings = [f for f in self.findings if f.missing and not f.blocking]
        if missing:
            head = f"{len(missing)} of {len(self.findings)} parts missing: a job cannot run"
        else:
            head = f"all {len(self.findings)} parts a job needs are there"
        return head + (f" ({len(warnings)} warning(s))" if warnings else "")


def render(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned on the widest cell; the last column is not padded."""
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    lines = []
    for row in (header, *rows):
        cells = [str(c).ljust(w) for c, w in zip(row[:-1], widths[:-1], strict=True)]
        lines.append("  ".join([*cells, str(row[-1])]).rstrip())
    return "\n".join(lines)
