"""Each API call the hooks make, described once: the requests it sends and how it reads the answers.

A description is a generator, as cleanup's kill is: it yields a :class:`Request` (or a pause, in
seconds), is sent back the decoded answer (or has the call's final error thrown in), and returns what
the hook method returns. The synchronous hook (hooks/sync.py) and the asynchronous one (hooks/aio.py)
run descriptions with a few lines each over their own transport (clients, credentials, the retry
policy), so a path, a selector, a query parameter or the meaning of a status is written here only, and
both hooks send the same requests and give the same answers.

Descriptions are pure: they take the namespace already resolved (each hook reads its connection's
default its own way) and never touch a client, so tests/unit/test_calls.py drives them without a server.
The streams (watches, followed logs) are async-only, but their requests are built here too
(:func:`watch_request`, :func:`pod_log_request`), from the same pieces as the plain list and log reads.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from airflow_tfjob.hooks.common import (
    COLLECTIONS,
    MERGE_PATCH,
    event_sort_key,
    events_field_selector,
    filter_events,
    job_path,
    job_pod_selector,
    poll_delay,
)
from airflow_tfjob.hooks.retry import Kind, RetryPolicy, api_status_code
from airflow_tfjob.jobs.kinds import JobKind, as_kind

T = TypeVar("T")


@dataclass(frozen=True)
class Request:
    """One HTTP request to the API server, and what its answer means."""

    method: str
    path: str
    #: The call as log lines and errors name it ("get TFJob ns/name").
    what: str
    query: tuple[tuple[str, str], ...] = ()
    body: Any = None
    content_type: str | None = None
    #: What the retry policy may repeat (hooks/retry.py): reads, idempotent writes, creates.
    retry: Kind = "read"
    decode: Literal["json", "text"] = "json"
    #: Statuses whose error reads as None: the object (or the API) is not there, which the call
    #: expects (a find, a delete that an earlier attempt already did, an API a cluster may not serve).
    absent: frozenset[int] = frozenset()
    #: An upper bound on the hook's api_retry_timeout for this request (a nicety must not wait long).
    retry_timeout: float | None = None

    def read(self, data: bytes) -> Any:
        """The answer's body as the description receives it."""
        return data.decode("utf-8", errors="replace") if self.decode == "text" else json.loads(data)

    def policy(self, hooks: RetryPolicy) -> RetryPolicy:
        """The retry policy this request runs under, given the hook's."""
        if self.retry_timeout is None:
            return hooks
        return dataclasses.replace(hooks, timeout=min(hooks.timeout, self.retry_timeout))

    def client_args(self) -> dict[str, Any]:
        """The arguments of the generated clients' ``call_api`` (sync and asyncio alike) after the path
        and method: the raw answer is returned, so that both hooks read it here, with :meth:`read`."""
        headers = {"Accept": "application/json, */*"}
        if self.content_type:
            headers["Content-Type"] = self.content_type
        return {
            "query_params": list(self.query),
            "header_params": headers,
            "body": self.body,
            "auth_settings": ["BearerToken"],
            "_preload_content": False,
        }


#: A step of a description: a request to send, or a pause (seconds) before the next one.
Step = Request | float
#: A described call: yields steps, is sent their answers (None for a pause), returns the call's result.
Call = Generator[Step, Any, T]


@dataclass(frozen=True)
class Done(Generic[T]):
    """A description has returned: `value` is the call's result."""

    value: T


def advance(call: Call[T], step: Step | None = None, outcome: Any = None) -> Step | Done[T]:
    """Hand `step`'s outcome (the raw answer, None after a pause, or the error the request ended
    with) to the description; its next step, or Done. Without `step`, the description's first step.

    The one place that reads answers and maps errors, so that both executors are loops around it.
    """
    try:
        if isinstance(outcome, BaseException):
            if isinstance(step, Request) and api_status_code(outcome) in step.absent:
                return call.send(None)
            return call.throw(outcome)
        return call.send(step.read(outcome) if isinstance(step, Request) else None)
    except StopIteration as done:
        return Done(done.value)


def _query(**params: object) -> tuple[tuple[str, str], ...]:
    """Query parameters in the API's names; None and False are left out (the server's defaults)."""
    return tuple(
        (name, "true" if value is True else str(value))
        for name, value in params.items()
        if value is not None and value is not False and value != ""
    )


def _delete_options(propagation: str | None, grace_period_seconds: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if propagation is not None:
        body["propagationPolicy"] = propagation
    if grace_period_seconds is not None:
        body["gracePeriodSeconds"] = grace_period_seconds
    return body


def _delete(path: str, what: str, propagation: str | None, grace: int | None) -> Call[None]:
    # A retried delete whose first attempt went through meets a 404: the object is gone either way.
    yield Request(
        "DELETE", path, what, body=_delete_options(propagation, grace), retry="write", absent=frozenset({404})
    )


def _items(data: Any) -> list[dict]:
    return list((data or {}).get("items") or [])


# -- jobs of any kind (`kind`: a JobKind row or its name) -----------------------------------------


def create_job(kind: JobKind | str, namespace: str, body: dict) -> Call[dict]:
    """Create a job; an ambiguous failure raises retry.AmbiguousCreate (the caller reads back)."""
    row = as_kind(kind)
    name = (body.get("metadata") or {}).get("name") or ""
    what = f"create {row.kind} {namespace}/{name}"
    return (yield Request("POST", job_path(row, namespace), what, body=body, retry="create"))


def _get_job(kind: JobKind | str, namespace: str, name: str, absent: frozenset[int]) -> Request:
    row = as_kind(kind)
    return Request("GET", job_path(row, namespace, name), f"get {row.kind} {namespace}/{name}", absent=absent)


def get_job(kind: JobKind | str, namespace: str, name: str) -> Call[dict]:
    """The job; the client's ApiException (status 404) when it does not exist."""
    return (yield _get_job(kind, namespace, name, frozenset()))


def find_job(kind: JobKind | str, namespace: str, name: str) -> Call[dict | None]:
    """The job, None when it does not exist."""
    return (yield _get_job(kind, namespace, name, frozenset({404})))


def patch_job(kind: JobKind | str, namespace: str, name: str, patch: dict) -> Call[dict]:
    """JSON merge patch (RFC 7386): the one patch type a custom resource accepts for a dict body.

    Retried like a read: a merge patch sets absolute values, so sending it twice changes nothing.
    """
    row = as_kind(kind)
    what = f"patch {row.kind} {namespace}/{name}"
    path = job_path(row, namespace, name)
    return (yield Request("PATCH", path, what, body=patch, content_type=MERGE_PATCH, retry="write"))


def delete_job(
    kind: JobKind | str, namespace: str, name: str, propagation: str, grace_period_seconds: int | None
) -> Call[None]:
    row = as_kind(kind)
    what = f"delete {row.kind} {namespace}/{name}"
    yield from _delete(job_path(row, namespace, name), what, propagation, grace_period_seconds)


def list_jobs(kind: JobKind | str, namespace: str, label_selector: str | None) -> Call[list[dict]]:
    items, _ = yield from list_objects(as_kind(kind).plural, namespace, label_selector)
    return items


def wait_for_job_deletion(kind: JobKind | str, namespace: str, name: str, timeout: float) -> Call[bool]:
    """Look until the job is gone (foreground deletion waits for its pods); False on timeout."""
    deadline = time.monotonic() + timeout
    while (yield from find_job(kind, namespace, name)) is not None:
        delay = poll_delay(deadline)
        if delay is None:
            return False
        yield delay
    return True


def served_resources(group_version: str) -> Call[set[str] | None]:
    """The resources (plurals) an API group version serves; None where the server does not serve it.

    API discovery (``GET /apis/<group>/<version>``), as kubectl does it.
    """
    data = yield Request(
        "GET", f"/apis/{group_version}", f"discover {group_version}", absent=frozenset({404})
    )
    if data is None:
        return None
    return {str(r.get("name")) for r in data.get("resources") or [] if isinstance(r, dict)}


def api_group(group: str) -> Call[dict | None]:
    """An API group's discovery document (``versions``, ``preferredVersion``); None where the server
    does not serve the group."""
    return (yield Request("GET", f"/apis/{group}", f"discover {group}", absent=frozenset({404})))


def _object_path(api_version: str, plural: str, namespace: str | None, name: str | None = None) -> str:
    """The path of any object (or, without ``name``, its collection); cluster-scoped without ``namespace``."""
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{scope}/{plural}/{name}" if name else f"{base}{scope}/{plural}"


def find_object(api_version: str, plural: str, name: str, namespace: str | None = None) -> Call[dict | None]:
    """Any object by its API version, plural and name (a ClusterTrainingRuntime, a ConfigMap); None when
    it does not exist or its API is not served. Read by the preflight, never followed."""
    where = f"{namespace}/{name}" if namespace else name
    path = _object_path(api_version, plural, namespace, name)
    return (yield Request("GET", path, f"get {plural} {where}", absent=frozenset({404})))


def apply_object(plural: str, body: dict, namespace: str | None = None) -> Call[str]:
    """Create ``body`` (of the API version it names), or replace the object of its name where one exists
    (409); ``"created"`` or ``"replaced"``. An admin's install (the TensorFlow ClusterTrainingRuntimes,
    tfjob-runtimes): the object's whole content is the caller's, so a create repeated after an unclear
    first attempt is harmless (its 409 is replaced), and the replace names the resourceVersion it read,
    so a change made in between is refused (409) rather than overwritten."""
    api_version, name = str(body["apiVersion"]), str(body["metadata"]["name"])
    where = f"{namespace}/{name}" if namespace else name
    what = f"{body.get('kind', plural)} {where}"
    path = _object_path(api_version, plural, namespace)
    created = yield Request("POST", path, f"create {what}", body=body, retry="write", absent=frozenset({409}))
    if created is not None:
        return "created"
    current = yield Request("GET", _object_path(api_version, plural, namespace, name), f"get {what}")
    version = current["metadata"]["resourceVersion"]
    replacement = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
    path = _object_path(api_version, plural, namespace, name)
    yield Request("PUT", path, f"replace {what}", body=replacement, retry="write")
    return "replaced"


ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def access_review(namespace: str | None, verb: str, group: str, resource: str) -> Call[bool]:
    """Whether the connection's user may `verb` `resource` (``pods/log``: a subresource) of `group` in
    `namespace` (None: at the cluster scope, a cluster-scoped resource's): a SelfSubjectAccessReview,
    which every authenticated user may create and which changes nothing (so it is retried like a read)."""
    plural, _, sub = resource.partition("/")
    attributes = {"verb": verb, "group": group, "resource": plural}
    if namespace is not None:
        attributes["namespace"] = namespace
    if sub:
        attributes["subresource"] = sub
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    what = f"review access to {verb} {resource} " + (f"in {namespace}" if namespace is not None else "cluster-wide")
    data = yield Request("POST", ACCESS_REVIEWS, what, body=body)
    return bool(((data or {}).get("status") or {}).get("allowed"))


# -- collections: jobs, pods, events (lists, and the watches that continue them) -------------------


def list_request(
    plural: str, namespace: str, label_selector: str | None = None, field_selector: str | None = None
) -> Request:
    """LIST of a job kind's plural ("tfjobs", "pytorchjobs"...), "pods" or "events"."""
    what = f"list {_collection(plural, namespace, label_selector, field_selector)}"
    query = _query(labelSelector=label_selector, fieldSelector=field_selector)
    return Request("GET", COLLECTIONS[plural].format(namespace=namespace), what, query)


def _collection(plural: str, namespace: str, label_selector: str | None, field_selector: str | None) -> str:
    selectors = ", ".join(s for s in (label_selector, field_selector) if s)
    return f"{plural} in {namespace}" + (f" ({selectors})" if selectors else "")


def list_objects(
    plural: str, namespace: str, label_selector: str | None = None, field_selector: str | None = None
) -> Call[tuple[list[dict], str]]:
    """(items, the list's resourceVersion to watch from)."""
    data = yield list_request(plural, namespace, label_selector, field_selector)
    return _items(data), str((data.get("metadata") or {}).get("resourceVersion") or "")


def watch_request(
    plural: str,
    namespace: str,
    resource_version: str | None,
    label_selector: str | None,
    field_selector: str | None,
    timeout_seconds: int,
    allow_bookmarks: bool,
) -> Request:
    """The watch that continues :func:`list_request` from `resource_version` (a stream: async only)."""
    listed = list_request(plural, namespace, label_selector, field_selector)
    query = _query(
        watch=True,
        timeoutSeconds=timeout_seconds,
        resourceVersion=resource_version,
        allowWatchBookmarks=allow_bookmarks,
    )
    what = f"watch {_collection(plural, namespace, label_selector, field_selector)}"
    return dataclasses.replace(listed, what=what, query=query + listed.query)


def list_job_pods(
    kind: JobKind | str,
    namespace: str,
    name: str,
    replica_type: str | None = None,
    replica_index: int | None = None,
) -> Call[list[dict]]:
    selector = job_pod_selector(name, replica_type, replica_index, as_kind(kind))
    items, _ = yield from list_objects("pods", namespace, label_selector=selector)
    return items


def list_events(namespace: str, involved_name: str | None, involved_uid: str | None) -> Call[list[dict]]:
    """Events of one object (by name and/or uid), oldest first."""
    selector = events_field_selector(involved_name, involved_uid)
    items, _ = yield from list_objects("events", namespace, field_selector=selector)
    return sorted(filter_events(items, involved_name, involved_uid), key=event_sort_key)


# -- pod logs ---------------------------------------------------------------------------------------


def pod_log_request(
    namespace: str,
    pod: str,
    container: str,
    *,
    tail_lines: int | None = None,
    previous: bool = False,
    since_time: str | None = None,
    timestamps: bool = False,
    follow: bool = False,
) -> Request:
    """A container's log: read once, or followed as a stream (`follow`, never for a `previous` one)."""
    query = _query(
        container=container,
        follow=follow and not previous,
        timestamps=timestamps,
        sinceTime=since_time,
        tailLines=tail_lines,
        previous=previous,
    )
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}/log"
    return Request("GET", path, f"read log of pod {namespace}/{pod}", query, decode="text")


def read_pod_log(
    namespace: str, pod: str, container: str, tail_lines: int | None, previous: bool
) -> Call[str]:
    return (yield pod_log_request(namespace, pod, container, tail_lines=tail_lines, previous=previous))


# -- pods and services (cleanup, TensorBoard) -------------------------------------------------------


def _core_path(plural: str, namespace: str, name: str | None = None) -> str:
    path = COLLECTIONS[plural].format(namespace=namespace)
    return f"{path}/{name}" if name else path


def create_core_object(namespace: str, body: dict) -> Call[dict]:
    """Create a Pod, a Service or a batch Job (keep_failed_for's expiry Job). Repeated on any transient
    failure: callers take 409 as "exists"."""
    kind = body["kind"]
    path = _core_path({"Pod": "pods", "Service": "services", "Job": "jobs"}[kind], namespace)
    meta = body["metadata"]
    what = f"create {kind} {namespace}/{meta.get('name') or meta['generateName'] + '*'}"
    return (yield Request("POST", path, what, body=body, retry="write"))


def get_service(namespace: str, name: str) -> Call[dict | None]:
    path = _core_path("services", namespace, name)
    return (yield Request("GET", path, f"get Service {namespace}/{name}", absent=frozenset({404})))


def delete_pod(namespace: str, name: str, grace_period_seconds: int | None) -> Call[None]:
    yield from _delete(
        _core_path("pods", namespace, name), f"delete Pod {namespace}/{name}", None, grace_period_seconds
    )


def delete_service(namespace: str, name: str) -> Call[None]:
    yield from _delete(
        _core_path("services", namespace, name), f"delete Service {namespace}/{name}", None, None
    )


# -- ConfigMaps: the deferred follows' log positions (triggers/positions.py) ------------------------


def get_config_map(namespace: str, name: str) -> Call[dict | None]:
    """The ConfigMap, None when there is none."""
    path = _core_path("configmaps", namespace, name)
    return (yield Request("GET", path, f"get ConfigMap {namespace}/{name}", absent=frozenset({404})))


def _patch_config_map_data(namespace: str, name: str, data: dict[str, str | None]) -> Request:
    # A merge patch of `data` touches only the keys it names (None removes one): writers of other
    # keys (another triggerer's follows) are neither overwritten nor conflicted with.
    path = _core_path("configmaps", namespace, name)
    what = f"patch ConfigMap {namespace}/{name}"
    return Request(
        "PATCH", path, what, body={"data": data}, content_type=MERGE_PATCH, retry="write", absent=frozenset({404})
    )


def merge_config_map_data(
    namespace: str, name: str, data: dict[str, str | None], labels: dict[str, str] | None = None
) -> Call[None]:
    """Set (str) or remove (None) entries of a ConfigMap's data, creating the ConfigMap if needed.

    Retried like a read: the patch sets absolute values. A ConfigMap that another writer creates
    between this call's patch and its create (409) is patched again.
    """
    if (yield _patch_config_map_data(namespace, name, data)) is not None:
        return
    kept = {key: value for key, value in data.items() if value is not None}
    if not kept:
        return  # nothing to remove from a ConfigMap that is not there
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "data": kept,
    }
    path = _core_path("configmaps", namespace)
    what = f"create ConfigMap {namespace}/{name}"
    if (yield Request("POST", path, what, body=body, retry="write", absent=frozenset({409}))) is None:
        yield _patch_config_map_data(namespace, name, data)
