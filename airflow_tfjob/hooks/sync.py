"""The synchronous hook (operator, sensor): the cncf KubernetesHook's clients under the retry policy."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
from kubernetes import client as sync_client
from kubernetes.client.rest import ApiException as SyncApiException

from airflow_tfjob.constants import CONTAINER_NAME, GROUP, VERSION
from airflow_tfjob.hooks import kueue as kueue_calls
from airflow_tfjob.hooks.common import (
    MERGE_PATCH,
    event_sort_key,
    events_field_selector,
    filter_events,
    job_pod_selector,
    poll_delay,
)
from airflow_tfjob.hooks.retry import Kind, RetryPolicy
from airflow_tfjob.kinds import TFJOB, JobKind, as_kind

T = TypeVar("T")


class TFJobHook(KubernetesHook):
    """Synchronous access to Kubeflow jobs (TFJob and the other kubeflow.org/v1 kinds) over the `kubernetes_default`-style connection.

    Connection handling (kube_config_path, kube_config, in_cluster, cluster_context, namespace extras;
    explicit arguments override them) is KubernetesHook's. Every call runs under the hook's
    :class:`~airflow_tfjob.hooks.retry.RetryPolicy` (``api_retry_timeout`` seconds in all); a 401
    rebuilds the clients from the configuration once (exec-plugin and token-file credentials are read
    again) before the call is retried.
    """

    hook_name = "Kubeflow TFJob"

    def __init__(self, *args: Any, api_retry_timeout: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_policy = RetryPolicy.from_timeout(api_retry_timeout)

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.get_namespace() or self.DEFAULT_NAMESPACE

    def _raw_json(self, resp: Any) -> Any:
        return json.loads(resp.data)

    def _call(self, call: str, kind: Kind, fn: Callable[[], T]) -> T:
        """Run one API call under the retry policy; `fn` looks its client up anew on every attempt."""

        def attempt() -> T:
            try:
                return fn()
            except SyncApiException as exc:
                if exc.status != 401:
                    raise
                self.log.warning("Kubernetes API %s: 401 Unauthorized; reloading credentials", call)
                self.reset_clients()
                return fn()

        return self.retry_policy.call(call, kind, attempt, self.log)

    def reset_clients(self) -> None:
        """Forget the built clients: the next call builds them from the configuration again."""
        for attr in (
            "api_client",
            "core_v1_client",
            "custom_object_client",
            "batch_v1_client",
            "apps_v1_client",
        ):
            self.__dict__.pop(attr, None)

    # -- jobs of any kubeflow.org/v1 kind (`kind`: a JobKind row or its name) ------------------------

    def create_job(self, kind: JobKind | str, body: dict, namespace: str | None = None) -> dict:
        """Create a job; an ambiguous failure raises retry.AmbiguousCreate (the caller reads back)."""
        row, ns = as_kind(kind), self._ns(namespace)
        name = (body.get("metadata") or {}).get("name")
        result: dict = self._call(
            f"create {row.kind} {ns}/{name}",
            "create",
            lambda: self.custom_object_client.create_namespaced_custom_object(
                GROUP, VERSION, ns, row.plural, body
            ),
        )
        return result

    def get_job(self, kind: JobKind | str, name: str, namespace: str | None = None) -> dict:
        """The job; raises the client's ApiException (status 404) when it does not exist."""
        row, ns = as_kind(kind), self._ns(namespace)
        result: dict = self._call(
            f"get {row.kind} {ns}/{name}",
            "read",
            lambda: self.custom_object_client.get_namespaced_custom_object(
                GROUP, VERSION, ns, row.plural, name
            ),
        )
        return result

    def find_job(self, kind: JobKind | str, name: str, namespace: str | None = None) -> dict | None:
        try:
            return self.get_job(kind, name, namespace)
        except SyncApiException as exc:
            if exc.status == 404:
                return None
            raise

    def patch_job(self, kind: JobKind | str, name: str, namespace: str | None, patch: dict) -> dict:
        """JSON merge patch (RFC 7386): the one patch type a custom resource accepts for a dict body.

        Retried like a read: a merge patch sets absolute values, so sending it twice changes nothing.
        """
        row, ns = as_kind(kind), self._ns(namespace)
        result: dict = self._call(
            f"patch {row.kind} {ns}/{name}",
            "write",
            lambda: self.custom_object_client.patch_namespaced_custom_object(
                GROUP, VERSION, ns, row.plural, name, patch, _content_type=MERGE_PATCH
            ),
        )
        return result

    def delete_job(
        self,
        kind: JobKind | str,
        name: str,
        namespace: str | None = None,
        propagation: str = "Foreground",
        grace_period_seconds: int | None = None,
    ) -> None:
        row, ns = as_kind(kind), self._ns(namespace)
        body = sync_client.V1DeleteOptions(
            propagation_policy=propagation, grace_period_seconds=grace_period_seconds
        )
        self._ignore_404(
            f"delete {row.kind} {ns}/{name}",
            lambda: self.custom_object_client.delete_namespaced_custom_object(
                GROUP, VERSION, ns, row.plural, name, body=body
            ),
        )

    def _ignore_404(self, call: str, fn: Callable[[], Any]) -> None:
        # A retried delete whose first attempt went through meets a 404: the object is gone either way.
        try:
            self._call(call, "write", fn)
        except SyncApiException as exc:
            if exc.status != 404:
                raise

    def list_jobs(
        self, kind: JobKind | str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict]:
        row, ns = as_kind(kind), self._ns(namespace)
        result = self._call(
            f"list {row.kind}s in {ns}",
            "read",
            lambda: self.custom_object_client.list_namespaced_custom_object(
                GROUP, VERSION, ns, row.plural, label_selector=label_selector or ""
            ),
        )
        return list(result.get("items") or [])

    def wait_for_job_deletion(
        self, kind: JobKind | str, name: str, namespace: str | None, timeout: float
    ) -> bool:
        """Poll until the job is gone (foreground deletion waits for its pods); False on timeout."""
        deadline = time.monotonic() + timeout
        while self.find_job(kind, name, namespace) is not None:
            delay = poll_delay(deadline)
            if delay is None:
                return False
            time.sleep(delay)
        return True

    # -- TFJobs: the names the provider had before other kinds (the generic calls with TFJOB) --------

    def create_tfjob(self, body: dict, namespace: str | None = None) -> dict:
        return self.create_job(TFJOB, body, namespace)

    def get_tfjob(self, name: str, namespace: str | None = None) -> dict:
        return self.get_job(TFJOB, name, namespace)

    def find_tfjob(self, name: str, namespace: str | None = None) -> dict | None:
        return self.find_job(TFJOB, name, namespace)

    def patch_tfjob(self, name: str, namespace: str | None, patch: dict) -> dict:
        return self.patch_job(TFJOB, name, namespace, patch)

    def delete_tfjob(
        self,
        name: str,
        namespace: str | None = None,
        propagation: str = "Foreground",
        grace_period_seconds: int | None = None,
    ) -> None:
        self.delete_job(TFJOB, name, namespace, propagation, grace_period_seconds)

    def list_tfjobs(self, namespace: str | None = None, label_selector: str | None = None) -> list[dict]:
        return self.list_jobs(TFJOB, namespace, label_selector)

    def wait_for_tfjob_deletion(self, name: str, namespace: str | None, timeout: float) -> bool:
        return self.wait_for_job_deletion(TFJOB, name, namespace, timeout)

    # -- pods, events, logs ------------------------------------------------------------------------

    def list_job_pods(
        self,
        name: str,
        namespace: str | None = None,
        replica_type: str | None = None,
        replica_index: int | None = None,
    ) -> list[dict]:
        ns = self._ns(namespace)
        resp = self._call(
            f"list pods of job {ns}/{name}",
            "read",
            lambda: self.core_v1_client.list_namespaced_pod(
                ns, label_selector=job_pod_selector(name, replica_type, replica_index), _preload_content=False
            ),
        )
        return list(self._raw_json(resp).get("items") or [])

    def list_events(
        self, namespace: str | None = None, involved_name: str | None = None, involved_uid: str | None = None
    ) -> list[dict]:
        """Events of one object (by name and/or uid), oldest first."""
        ns = self._ns(namespace)
        resp = self._call(
            f"list events of {ns}/{involved_name or involved_uid}",
            "read",
            lambda: self.core_v1_client.list_namespaced_event(
                ns, field_selector=events_field_selector(involved_name, involved_uid), _preload_content=False
            ),
        )
        events = filter_events(self._raw_json(resp).get("items") or [], involved_name, involved_uid)
        return sorted(events, key=event_sort_key)

    def read_pod_log(
        self,
        pod: str,
        namespace: str | None = None,
        container: str = CONTAINER_NAME,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        ns = self._ns(namespace)
        kwargs: dict[str, Any] = {"container": container, "previous": previous, "_preload_content": False}
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines
        resp = self._call(
            f"read log of pod {ns}/{pod}",
            "read",
            lambda: self.core_v1_client.read_namespaced_pod_log(pod, ns, **kwargs),
        )
        return bytes(resp.data).decode("utf-8", errors="replace")

    # -- pods and services (cleanup, TensorBoard) --------------------------------------------------

    def create_core_object(self, body: dict, namespace: str | None = None) -> dict:
        """Create a Pod or a Service. Repeated on any transient failure: callers take 409 as "exists"."""
        ns = self._ns(namespace)
        kind = body["kind"]
        create = {
            "Pod": lambda: self.core_v1_client.create_namespaced_pod(ns, body, _preload_content=False),
            "Service": lambda: self.core_v1_client.create_namespaced_service(
                ns, body, _preload_content=False
            ),
        }[kind]
        resp = self._call(f"create {kind} {ns}/{body['metadata']['name']}", "write", create)
        result: dict = self._raw_json(resp)
        return result

    def get_service(self, name: str, namespace: str | None = None) -> dict | None:
        ns = self._ns(namespace)
        try:
            resp = self._call(
                f"get Service {ns}/{name}",
                "read",
                lambda: self.core_v1_client.read_namespaced_service(name, ns, _preload_content=False),
            )
        except SyncApiException as exc:
            if exc.status == 404:
                return None
            raise
        result: dict = self._raw_json(resp)
        return result

    def delete_pod(
        self, name: str, namespace: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        ns = self._ns(namespace)
        kwargs: dict[str, Any] = {}
        if grace_period_seconds is not None:
            kwargs["grace_period_seconds"] = grace_period_seconds
        self._ignore_404(
            f"delete Pod {ns}/{name}", lambda: self.core_v1_client.delete_namespaced_pod(name, ns, **kwargs)
        )

    def delete_service(self, name: str, namespace: str | None = None) -> None:
        ns = self._ns(namespace)
        self._ignore_404(
            f"delete Service {ns}/{name}", lambda: self.core_v1_client.delete_namespaced_service(name, ns)
        )

    # -- Kueue (hooks/kueue.py): the job's Workloads, its queue position ---------------------------

    list_workloads = kueue_calls.list_workloads_sync
    pending_workloads = kueue_calls.pending_workloads_sync
