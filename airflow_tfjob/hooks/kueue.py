"""The hooks' Kueue calls: a job's Workloads and its LocalQueue's pending workloads (positions).

Functions of the hook, bound in the class bodies of ``TFJobHook`` and ``AsyncTFJobHook`` (as
``hooks/streams.py`` does) so that they are the hooks' methods, sync and async twins with the same
names and answers. Ground truth: docs/reference/kueue-behaviour.md §1 (versions), §4.3 (the
Workload's owner and label), §8 (visibility API).

- Workloads: ``kueue.x-k8s.io/v1beta2``, falling back to ``v1beta1`` when the group-version is not
  served (404; Kueue before 0.15); ``None`` when neither is (no Kueue). The version that answered is
  remembered by the hook. Found by the ``kueue.x-k8s.io/job-uid`` label and kept only if the label
  or an ownerReference names the job's UID (never by a computed name: it hashes the UID).
- Pending workloads: the visibility API, an aggregated API that may be absent, refused or down. A
  404 or 403 means "no positions" (``None``); other failures are retried for a few seconds only,
  so that a position, which is a nicety, never holds up following the job.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airflow_tfjob.hooks.retry import RetryPolicy, api_status_code
from airflow_tfjob.kueue.workload import GROUP, LABEL_JOB_UID, VERSIONS, VISIBILITY_GROUP, owned_by

if TYPE_CHECKING:
    from airflow_tfjob.hooks.aio import AsyncTFJobHook
    from airflow_tfjob.hooks.sync import TFJobHook

#: Seconds a pending-workloads read is retried in all (the hook's api_retry_timeout, if shorter).
VISIBILITY_RETRY_TIMEOUT = 5.0


def _no_positions(exc: BaseException) -> str | None:
    """Why an answer means "no positions": "refused" (403: no other version asked), "not served"
    (404: the next version is tried), or None (an error)."""
    return {403: "refused", 404: "not served"}.get(api_status_code(exc) or 0)


def _workload_versions(hook: Any) -> tuple[str, ...]:
    known = getattr(hook, "_kueue_version", None)
    return (known,) if known else VERSIONS


def _workloads_path(version: str, namespace: str) -> str:
    return f"/apis/{GROUP}/{version}/namespaces/{namespace}/workloads"


def _pending_path(version: str, namespace: str, local_queue: str) -> str:
    return f"/apis/{VISIBILITY_GROUP}/{version}/namespaces/{namespace}/localqueues/{local_queue}/pendingworkloads"


def _owned(data: Any, job_uid: str) -> list[dict]:
    return [w for w in (data or {}).get("items") or () if isinstance(w, dict) and owned_by(w, job_uid)]


def _visibility_policy(hook: Any) -> RetryPolicy:
    return RetryPolicy.from_timeout(min(hook.retry_policy.timeout, VISIBILITY_RETRY_TIMEOUT))


# -- async ---------------------------------------------------------------------------------------


async def list_workloads(self: AsyncTFJobHook, namespace: str | None, job_uid: str) -> list[dict] | None:
    """The Kueue Workloads of the job with UID ``job_uid``; None when Kueue's API is not served."""
    ns = await self._ns(namespace)
    for version in _workload_versions(self):
        try:
            data = await self._json(
                "GET",
                _workloads_path(version, ns),
                query=[("labelSelector", f"{LABEL_JOB_UID}={job_uid}")],
                call=f"list Workloads ({version}) of job {job_uid} in {ns}",
            )
        except Exception as exc:
            if api_status_code(exc) == 404:
                continue
            raise
        self._kueue_version = version  # type: ignore[attr-defined]
        return _owned(data, job_uid)
    return None


async def pending_workloads(self: AsyncTFJobHook, namespace: str | None, local_queue: str) -> dict | None:
    """The LocalQueue's PendingWorkloadsSummary (positions); None when the visibility API gives none."""
    ns = await self._ns(namespace)
    policy = _visibility_policy(self)
    for version in VERSIONS:
        path = _pending_path(version, ns, local_queue)

        async def attempt(path: str = path) -> Any:
            resp = await self._request("GET", path)
            try:
                return json.loads(await resp.read())
            finally:
                resp.release()

        try:
            result: dict = await policy.acall(
                f"read pending workloads of {ns}/{local_queue}", "read", attempt, self.log
            )
            return result
        except Exception as exc:
            why = _no_positions(exc)
            if why is None:
                raise
            if why == "refused":
                return None
    return None


# -- sync ----------------------------------------------------------------------------------------


def _get_json(hook: TFJobHook, path: str, query: list[tuple[str, str]]) -> Any:
    resp = hook.api_client.call_api(
        path,
        "GET",
        query_params=query,
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    return json.loads(resp.data)


def list_workloads_sync(self: TFJobHook, namespace: str | None, job_uid: str) -> list[dict] | None:
    """The Kueue Workloads of the job with UID ``job_uid``; None when Kueue's API is not served."""
    ns = self._ns(namespace)
    for version in _workload_versions(self):
        path = _workloads_path(version, ns)
        query = [("labelSelector", f"{LABEL_JOB_UID}={job_uid}")]
        try:
            data = self._call(
                f"list Workloads ({version}) of job {job_uid} in {ns}",
                "read",
                lambda path=path, query=query: _get_json(self, path, query),  # type: ignore[misc]
            )
        except Exception as exc:
            if api_status_code(exc) == 404:
                continue
            raise
        self._kueue_version = version  # type: ignore[attr-defined]
        return _owned(data, job_uid)
    return None


def pending_workloads_sync(self: TFJobHook, namespace: str | None, local_queue: str) -> dict | None:
    """The LocalQueue's PendingWorkloadsSummary (positions); None when the visibility API gives none."""
    ns = self._ns(namespace)
    policy = _visibility_policy(self)
    for version in VERSIONS:
        path = _pending_path(version, ns, local_queue)
        try:
            result: dict = policy.call(
                f"read pending workloads of {ns}/{local_queue}",
                "read",
                lambda path=path: _get_json(self, path, []),  # type: ignore[misc]
                self.log,
            )
            return result
        except Exception as exc:
            why = _no_positions(exc)
            if why is None:
                raise
            if why == "refused":
                return None
    return None
