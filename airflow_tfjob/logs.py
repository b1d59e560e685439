"""Resumable, de-duplicated log streams of a TFJob's replicas, written line by line to a sink.

Why it is built this way:
- A follow stream can be cut at any time (network, API server restart, read timeout). The kubelet only
  resumes from `sinceTime`, which the API truncates to whole seconds, so a reconnect replays part of the
  last second. Each replica therefore keeps a cursor (container instance, timestamp of the last line,
  number of lines seen with exactly that timestamp) and drops what it has already shown.
- A container can restart in place (OnFailure) or its pod be recreated (ExitCode policy, same name, new
  uid); both are announced with a marker line, and the rest of the old run is read from `previous`.
- Operators up to v1.9.3 delete every pod on deadline or backoff failures before Failed is visible, so
  every replica is streamed (selected ones to the sink, all into a ring buffer) and diagnostics can show
  the last lines of a replica whose pod is gone.
- A runaway job must not flood the task log: a per-replica rate limit and a total cap drop lines with a
  line saying how many were dropped; dropped lines still feed the ring buffer and the metrics.
- Airflow's task log costs about the same per record whatever its length (the task process encodes JSON,
  the supervisor decodes it and encodes it again into the file), so lines that arrive together go out
  as one multi-line record (`LogBatcher`), each line keeping its `[replica] ` prefix.
The pure parts live in ``logs_parsing.py`` and the stream reading in ``logs_follow.py``; this module
keeps their names importable from one place.
"""

from __future__ import annotations

from airflow_tfjob.logs_follow import JobLogFollower, ReplicaFollower, ReplicaState
from airflow_tfjob.logs_parsing import (
    MAX_LINE_BYTES,
    RECORD_MAX_BYTES,
    RECORD_MAX_LINES,
    RING_LINES,
    TRUNCATION_MARK,
    Cursor,
    LineSplitter,
    LogBatcher,
    LogLimits,
    LogSelection,
    RateLimiter,
    ResumeFilter,
    container_status,
    format_timestamp,
    is_master_role,
    main_container,
    parse_timestamp,
    pod_replica,
    pod_terminal,
    replica_name,
    split_timestamp,
    terminated_exit_code,
)

__all__ = [
    "MAX_LINE_BYTES",
    "RECORD_MAX_BYTES",
    "RECORD_MAX_LINES",
    "RING_LINES",
    "TRUNCATION_MARK",
    "Cursor",
    "JobLogFollower",
    "LineSplitter",
    "LogBatcher",
    "LogLimits",
    "LogSelection",
    "RateLimiter",
    "ReplicaFollower",
    "ReplicaState",
    "ResumeFilter",
    "container_status",
    "format_timestamp",
    "is_master_role",
    "main_container",
    "parse_timestamp",
    "pod_replica",
    "pod_terminal",
    "replica_name",
    "split_timestamp",
    "terminated_exit_code",
]
