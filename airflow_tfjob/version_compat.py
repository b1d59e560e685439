"""What the installed Airflow release offers: version flags, the names that moved between releases, and
the one warning a task writes about the features its release lacks.

The provider supports Airflow 3.0.6 and every later 3.x. Each flag is computed once from the installed
release (as Airflow's own providers do in their ``version_compat`` modules), so that a branch reads as
the release it is for. Names whose home changed and that many rooms use (``conf``, the exceptions) are
imported here from where the running release keeps them; rarer or heavier ones (``BaseHook``,
``DagBag``, the plugin base, the masker's calls) are imported where they are used, behind the same
flags, so that this module stays as light as a DAG file's parse and a triggerer's load need.

What only a newer release has degrades below it, never with an ImportError: :data:`FEATURES` names each
such feature, what a task loses without it and the provider's fallback, and :func:`missing_features`
gives the one log line a task writes about them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow.version import version as _airflow_version
from packaging.version import Version

#: The installed release without pre-release or local parts (3.3.0rc1 counts as 3.3.0).
AIRFLOW_VERSION = Version(Version(_airflow_version).base_version)
AIRFLOW_V_3_1_PLUS = AIRFLOW_VERSION >= Version("3.1.0")
AIRFLOW_V_3_2_PLUS = AIRFLOW_VERSION >= Version("3.2.0")
AIRFLOW_V_3_3_PLUS = AIRFLOW_VERSION >= Version("3.3.0")

if AIRFLOW_V_3_2_PLUS:
    from airflow.sdk import conf
    from airflow.sdk.exceptions import (
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
        AirflowTaskTimeout,
    )
else:  # 3.0 and 3.1 keep the configuration and the full exception set in the core package
    from airflow.configuration import conf  # type: ignore[no-redef,assignment]
    from airflow.exceptions import (  # type: ignore[no-redef,assignment]
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
        AirflowTaskTimeout,
    )


@dataclass(frozen=True)
class Feature:
    """A feature of a newer Airflow release the provider uses, and what happens without it."""

    name: str
    since: str
    without: str


#: Each feature the provider uses that a supported release may lack, keyed by a short name.
FEATURES: dict[str, Feature] = {
    feature.name: feature
    for feature in (
        Feature(
            "retry_policy",
            "3.3",
            "TrainingRetryPolicy cannot choose the retry delay or raise a memory limit; the provider fails "
            "a job's own failure at once (no retry spent) and leaves the cluster's failures to `retries`",
        ),
        Feature(
            "task_state_store",
            "3.3",
            "a retry finds its earlier job by the identity labels alone; the checkpoint a try recorded "
            "is not handed on (an object-storage directory is listed instead, a claim's is not)",
        ),
        Feature(
            "trigger_on_kill",
            "3.3",
            "a kill of the deferred task is told from a triggerer restart by reading the task's state "
            "when the trigger is cancelled (and by the plugin's listener in the API server)",
        ),
    )
}


def available(name: str) -> bool:
    """Whether the installed release has the feature ``name`` (a key of :data:`FEATURES`)."""
    return AIRFLOW_VERSION >= Version(FEATURES[name].since)


def missing_features(*names: str) -> str | None:
    """One line naming which of ``names`` the installed release lacks, what is lost and since which
    release each works; None when it has them all."""
    lacking = [FEATURES[name] for name in names if not available(name)]
    if not lacking:
        return None
    parts = "; ".join(f"{f.name} (Airflow {f.since}+): {f.without}" for f in lacking)
    return f"Airflow {_airflow_version} lacks {len(lacking)} feature(s) this provider uses: {parts}"


def warn_missing(log: Any, *names: str) -> None:
    """Write :func:`missing_features`' line to ``log`` (a task's or a trigger's), if there is one."""
    line = missing_features(*names)
    if line is not None:
        log.warning(line)


__all__ = [
    "AIRFLOW_VERSION",
    "AIRFLOW_V_3_1_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "FEATURES",
    "AirflowException",
    "AirflowFailException",
    "AirflowNotFoundException",
    "AirflowTaskTimeout",
    "Feature",
    "available",
    "conf",
    "missing_features",
    "warn_missing",
]
