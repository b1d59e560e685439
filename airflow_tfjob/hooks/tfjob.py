"""API access for TFJobs, their pods, events and logs, through the cncf.kubernetes connection.

`TFJobHook` is synchronous (operator, sensor); `AsyncTFJobHook` is used by the follow core in both the
synchronous operator (inside `asyncio.run`) and the triggerer. Neither interprets what it reads: status
interpretation, log de-duplication and diagnostics live in their own modules.

Objects are returned as plain dicts in API form (camelCase), read from the raw JSON, so every caller sees
what `kubectl get -o json` would show whichever client fetched it.

The hooks live in hooks/sync.py (TFJobHook) and hooks/aio.py (AsyncTFJobHook, its log and watch
streams in hooks/streams.py); this module keeps the names the documentation uses (and the provider's
classpaths) importable from one place.
"""

from __future__ import annotations

from airflow_tfjob.hooks.aio import AsyncTFJobHook
from airflow_tfjob.hooks.clients import close_shared_clients
from airflow_tfjob.hooks.common import MERGE_PATCH, api_status, job_pod_selector
from airflow_tfjob.hooks.streams import iter_lines
from airflow_tfjob.hooks.sync import TFJobHook
from airflow_tfjob.watching import WatchError, WatchExpired

__all__ = [
    "MERGE_PATCH",
    "AsyncTFJobHook",
    "TFJobHook",
    "WatchError",
    "WatchExpired",
    "api_status",
    "close_shared_clients",
    "iter_lines",
    "job_pod_selector",
]
