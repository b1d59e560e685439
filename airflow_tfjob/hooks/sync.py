"""The synchronous hook (operator, sensor): the calls described in hooks/calls.py and hooks/kueue.py,
sent through the cncf KubernetesHook's ApiClient under the retry policy."""

from __future__ import annotations

import time
from typing import Any, TypeVar

from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
from kubernetes.client.rest import ApiException as SyncApiException

from airflow_tfjob.constants import CONTAINER_NAME
from airflow_tfjob.hooks import calls, kueue
from airflow_tfjob.hooks.calls import Call, Done, Request, Step, advance
from airflow_tfjob.hooks.connection import hook_kwargs
from airflow_tfjob.hooks.retry import RetryPolicy
from airflow_tfjob.jobs.kinds import JobKind

T = TypeVar("T")


class KubeflowJobHook(KubernetesHook):
    """Synchronous access to Kubeflow jobs (TFJob and the other kubeflow.org/v1 kinds) over the `kubernetes_default`-style connection.

    Connection handling (kube_config_path, kube_config, in_cluster, cluster_context, namespace extras;
    explicit arguments override them) is KubernetesHook's. Every call runs under the hook's
    :class:`~airflow_tfjob.hooks.retry.RetryPolicy` (``api_retry_timeout`` seconds in all); a 401
    rebuilds the clients from the configuration once (exec-plugin and token-file credentials are read
    again) before the call is retried.
    """

    hook_name = "Kubeflow training job"

    def __init__(self, *args: Any, api_retry_timeout: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_policy = RetryPolicy.from_timeout(api_retry_timeout)
        self._workload_version = kueue.workload_version(kueue.connection_of(self))

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.get_namespace() or self.DEFAULT_NAMESPACE

    def _run(self, call: Call[T]) -> T:
        """Run a described call (hooks/calls.py): each request under the retry policy, each pause slept."""
        step = advance(call)
        while not isinstance(step, Done):
            step = advance(call, step, self._outcome(step))
        return step.value

    def _outcome(self, step: Step) -> Any:
        """The raw answer of a request (or the error it ended with); None after a pause."""
        if not isinstance(step, Request):
            time.sleep(step)
            return None
        try:
            return step.policy(self.retry_policy).call(
                step.what, step.retry, lambda: self._send(step), self.log
            )
        except Exception as exc:
            return exc

    def _send(self, request: Request) -> bytes:
        """One attempt; a 401 rebuilds the clients from the configuration and sends it once more."""
        try:
            return self._http(request)
        except SyncApiException as exc:
            if exc.status != 401:
                raise
            self.log.warning("Kubernetes API %s: 401 Unauthorized; reloading credentials", request.what)
            self.reset_clients()
            return self._http(request)

    def _http(self, request: Request) -> bytes:
        # The client's generic call: auth, host, TLS and the non-2xx ApiException are its own.
        resp = self.api_client.call_api(
            request.path, request.method, _return_http_data_only=True, **request.client_args()
        )
        return bytes(resp.data)

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
        return self._run(calls.create_job(kind, self._ns(namespace), body))

    def get_job(self, kind: JobKind | str, name: str, namespace: str | None = None) -> dict:
        """The job; raises the client's ApiException (status 404) when it does not exist."""
        return self._run(calls.get_job(kind, self._ns(namespace), name))

    def find_job(self, kind: JobKind | str, name: str, namespace: str | None = None) -> dict | None:
        return self._run(calls.find_job(kind, self._ns(namespace), name))

    def patch_job(self, kind: JobKind | str, name: str, namespace: str | None, patch: dict) -> dict:
        """JSON merge patch (RFC 7386), retried like a read: sending it twice changes nothing."""
        return self._run(calls.patch_job(kind, self._ns(namespace), name, patch))

    def delete_job(
        self,
        kind: JobKind | str,
        name: str,
        namespace: str | None = None,
        propagation: str = "Foreground",
        grace_period_seconds: int | None = None,
    ) -> None:
        self._run(calls.delete_job(kind, self._ns(namespace), name, propagation, grace_period_seconds))

    def list_jobs(
        self, kind: JobKind | str, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict]:
        return self._run(calls.list_jobs(kind, self._ns(namespace), label_selector))

    def wait_for_job_deletion(
        self, kind: JobKind | str, name: str, namespace: str | None, timeout: float
    ) -> bool:
        """Poll until the job is gone (foreground deletion waits for its pods); False on timeout."""
        return self._run(calls.wait_for_job_deletion(kind, self._ns(namespace), name, timeout))

    def served_resources(self, group_version: str) -> set[str] | None:
        """The resources (plurals) an API group version serves; None where the server does not serve it.

        API discovery (``GET /apis/<group>/<version>``), as kubectl does it: TFJobOperator(api="auto")
        reads whether ``kubeflow.org/v1`` serves ``tfjobs``.
        """
        return self._run(calls.served_resources(group_version))

    def api_group(self, group: str) -> dict | None:
        """An API group's discovery document (served versions, the preferred one); None if not served."""
        return self._run(calls.api_group(group))

    def find_object(
        self, api_version: str, plural: str, name: str, namespace: str | None = None
    ) -> dict | None:
        """Any object by API version, plural and name (cluster-scoped without `namespace`); None if absent."""
        return self._run(calls.find_object(api_version, plural, name, namespace))

    def apply_object(self, plural: str, body: dict, namespace: str | None = None) -> str:
        """Create ``body``, or replace the object of its name (cluster-scoped without ``namespace``):
        ``"created"`` or ``"replaced"``. What ``tfjob-runtimes install`` installs its runtimes with."""
        return self._run(calls.apply_object(plural, body, namespace))

    def access_review(
        self, verb: str, group: str, resource: str, namespace: str | None = None, *, cluster_scoped: bool = False
    ) -> bool:
        """Whether the connection's user may `verb` `resource` of `group` (a SelfSubjectAccessReview), in
        `namespace` or, ``cluster_scoped``, at the cluster scope (a cluster-scoped resource)."""
        return self._run(calls.access_review(None if cluster_scoped else self._ns(namespace), verb, group, resource))

    # -- pods, events, logs ------------------------------------------------------------------------

    def list_job_pods(
        self,
        name: str,
        namespace: str | None = None,
        replica_type: str | None = None,
        replica_index: int | None = None,
        kind: JobKind | str = "TFJob",
    ) -> list[dict]:
        return self._run(calls.list_job_pods(kind, self._ns(namespace), name, replica_type, replica_index))

    def list_events(
        self, namespace: str | None = None, involved_name: str | None = None, involved_uid: str | None = None
    ) -> list[dict]:
        """Events of one object (by name and/or uid), oldest first."""
        return self._run(calls.list_events(self._ns(namespace), involved_name, involved_uid))

    def read_pod_log(
        self,
        pod: str,
        namespace: str | None = None,
        container: str = CONTAINER_NAME,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        return self._run(calls.read_pod_log(self._ns(namespace), pod, container, tail_lines, previous))

    # -- pods and services (cleanup, TensorBoard) --------------------------------------------------

    def create_core_object(self, body: dict, namespace: str | None = None) -> dict:
        """Create a Pod, a Service or a batch Job. Repeated on any transient failure: callers take 409 as
        "exists"."""
        return self._run(calls.create_core_object(self._ns(namespace), body))

    def get_service(self, name: str, namespace: str | None = None) -> dict | None:
        return self._run(calls.get_service(self._ns(namespace), name))

    def delete_pod(
        self, name: str, namespace: str | None = None, grace_period_seconds: int | None = None
    ) -> None:
        self._run(calls.delete_pod(self._ns(namespace), name, grace_period_seconds))

    def delete_service(self, name: str, namespace: str | None = None) -> None:
        self._run(calls.delete_service(self._ns(namespace), name))

    # -- Kueue (hooks/kueue.py): the job's Workloads, its queue position ---------------------------

    def list_workloads(self, namespace: str | None, job_uid: str) -> list[dict] | None:
        """The Kueue Workloads of the job with UID ``job_uid``; None when Kueue's API is not served."""
        return self._run(kueue.list_workloads(self._ns(namespace), job_uid, self._workload_version))

    def pending_workloads(self, namespace: str | None, local_queue: str) -> dict | None:
        """The LocalQueue's PendingWorkloadsSummary (positions); None when the visibility API gives none."""
        return self._run(kueue.pending_workloads(self._ns(namespace), local_queue))

    def connection_extra(self, name: str) -> Any:
        """A field of the connection's extra (None when absent): what an integration keeps there
        (MultiKueue's worker map)."""
        return self._get_field(name)

    def multikueue_cluster(self, name: str) -> dict | None:
        """MultiKueue's cluster object ``name`` (its ``Active`` condition); None when absent or refused."""
        return self._run(kueue.multikueue_cluster(name))


def task_hook(owner: Any) -> KubeflowJobHook:
    """The synchronous hook of an operator or sensor, made once per instance (their run modules' ``hook``,
    the body of their ``get_hook``).

    A new hook loads the kubeconfig again, and for an exec credential plugin (EKS, GKE, AKS: a second
    or more per run) that means running the plugin again: a task made one per step, a poking sensor
    one per poke. The one hook keeps its client; its token is refreshed by the client and a 401 makes
    it reload its credentials.
    """
    hook: KubeflowJobHook | None = owner.__dict__.get("_task_hook")
    if hook is None:
        hook = owner.__dict__["_task_hook"] = KubeflowJobHook(**hook_kwargs(owner))
    return hook
