"""The hooks' call descriptions (hooks/calls.py, hooks/kueue.py), driven without a server: the requests
each one sends, how it reads the answers, what an error status means; then both executors running
the same description to the same result, and the rule that hooks/ binds no function into a class."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import pkgutil
from typing import Any

import pytest
from kubernetes.client.rest import ApiException as SyncApiException
from kubernetes_asyncio.client.exceptions import ApiException as AsyncApiException

import airflow_tfjob.hooks
from airflow_tfjob.hooks import calls, kueue
from airflow_tfjob.hooks.calls import Call, Done, Request, advance
from airflow_tfjob.hooks.retry import RetryPolicy
from airflow_tfjob.jobs.kinds import PYTORCHJOB, TFJOB, TRAINJOB

Outcome = Any  # an answer (a JSON-able value, or bytes as sent) or an exception with .status


class Status(Exception):
    """An API error as either client raises it: only its HTTP status matters to a description."""

    def __init__(self, status: int) -> None:
        super().__init__(f"status {status}")
        self.status = status


def drive(call: Call[Any], *outcomes: Outcome) -> tuple[list[Request | float], Any]:
    """Run a description as the executors do, answering its requests in order: (its steps, its result)."""
    answers = list(outcomes)
    steps: list[Request | float] = []
    step = advance(call)
    while not isinstance(step, Done):
        steps.append(step)
        outcome = answers.pop(0) if isinstance(step, Request) else None
        if outcome is not None and not isinstance(outcome, (bytes, BaseException)):
            outcome = json.dumps(outcome).encode()
        step = advance(call, step, outcome)
    assert not answers, f"answers left unasked: {answers}"
    return steps, step.value


def only(steps: list[Request | float]) -> Request:
    assert len(steps) == 1 and isinstance(steps[0], Request)
    return steps[0]


# -- jobs -------------------------------------------------------------------------------------------


def test_get_job_reads_the_kinds_path_and_returns_the_object() -> None:
    steps, job = drive(calls.get_job("PyTorchJob", "team-a", "j"), {"kind": "PyTorchJob"})
    request = only(steps)
    assert (request.method, request.path) == ("GET", "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/j")
    assert (request.what, request.retry, request.query, request.body) == (
        "get PyTorchJob team-a/j",
        "read",
        (),
        None,
    )
    assert job == {"kind": "PyTorchJob"}


def test_find_job_reads_404_as_none_and_raises_anything_else() -> None:
    assert drive(calls.find_job(TFJOB, "ns", "gone"), Status(404))[1] is None
    with pytest.raises(Status) as raised:
        drive(calls.find_job(TFJOB, "ns", "j"), Status(403))
    assert raised.value.status == 403
    with pytest.raises(Status):  # a get is not a find: the 404 reaches the caller
        drive(calls.get_job(TFJOB, "ns", "gone"), Status(404))


def test_create_job_posts_to_the_collection_as_a_create() -> None:
    body = {"kind": "TrainJob", "metadata": {"name": "t"}}
    steps, created = drive(calls.create_job(TRAINJOB, "ns", body), {"metadata": {"uid": "u"}})
    request = only(steps)
    assert (request.method, request.path, request.body) == (
        "POST",
        f"/apis/{TRAINJOB.api_version}/namespaces/ns/trainjobs",
        body,
    )
    assert (request.retry, request.what, created) == (
        "create",
        "create TrainJob ns/t",
        {"metadata": {"uid": "u"}},
    )


def test_patch_job_is_a_merge_patch_retried_as_a_write() -> None:
    request = only(drive(calls.patch_job(TFJOB, "ns", "j", {"spec": {}}), {})[0])
    assert (request.method, request.content_type, request.retry) == (
        "PATCH",
        "application/merge-patch+json",
        "write",
    )
    assert request.client_args()["header_params"]["Content-Type"] == "application/merge-patch+json"
    assert (
        "Content-Type"
        not in only(drive(calls.get_job(TFJOB, "ns", "j"), {})[0]).client_args()["header_params"]
    )


def test_delete_job_sends_its_options_and_takes_404_as_done() -> None:
    steps, result = drive(calls.delete_job(PYTORCHJOB, "ns", "j", "Foreground", 1), Status(404))
    request = only(steps)
    assert (request.method, request.retry, result) == ("DELETE", "write", None)
    assert request.body == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Foreground",
        "gracePeriodSeconds": 1,
    }
    with pytest.raises(Status):
        drive(calls.delete_job(TFJOB, "ns", "j", "Foreground", None), Status(409))


def test_a_pod_deletion_has_no_propagation_and_the_pods_grace() -> None:
    request = only(drive(calls.delete_pod("ns", "p-0", None), {})[0])
    assert request.path == "/api/v1/namespaces/ns/pods/p-0"
    assert request.body == {"kind": "DeleteOptions", "apiVersion": "v1"}
    service = only(drive(calls.delete_service("ns", "p-0"), Status(404))[0])
    assert (service.path, service.what) == ("/api/v1/namespaces/ns/services/p-0", "delete Service ns/p-0")


def test_wait_for_job_deletion_pauses_between_finds_until_the_job_is_gone() -> None:
    steps, gone = drive(calls.wait_for_job_deletion(TFJOB, "ns", "j", 30), {"kind": "TFJob"}, Status(404))
    assert [type(s) for s in steps] == [Request, float, Request]
    assert 0 < float(steps[1]) <= 0.5 and gone is True  # type: ignore[arg-type]
    steps, gone = drive(calls.wait_for_job_deletion(TFJOB, "ns", "j", 0), {"kind": "TFJob"})
    assert len(steps) == 1 and gone is False  # out of time: no pause past the deadline


def test_served_resources_reads_discovery_and_takes_404_as_not_served() -> None:
    answer = {"resources": [{"name": "tfjobs"}, {"name": "tfjobs/status"}, "junk"]}
    steps, served = drive(calls.served_resources("kubeflow.org/v1"), answer)
    assert (only(steps).path, served) == ("/apis/kubeflow.org/v1", {"tfjobs", "tfjobs/status"})
    assert drive(calls.served_resources("kubeflow.org/v1"), Status(404))[1] is None


# -- collections, logs -------------------------------------------------------------------------------


def test_a_jobs_pods_are_selected_by_the_kinds_labels() -> None:
    steps, pods = drive(calls.list_job_pods(TFJOB, "ns", "j", "Worker", 1), {"items": [{"a": 1}]})
    request = only(steps)
    assert request.path == "/api/v1/namespaces/ns/pods" and pods == [{"a": 1}]
    selector = dict(request.query)["labelSelector"]
    assert selector == f"{TFJOB.pod_job_label}=j,{TFJOB.pod_type_label}=worker,{TFJOB.pod_index_label}=1"
    trainjob = only(drive(calls.list_job_pods(TRAINJOB, "ns", "t"), {"items": []})[0])
    assert dict(trainjob.query) == {"labelSelector": f"{TRAINJOB.pod_job_label}=t"}


def test_list_objects_returns_the_items_and_the_version_to_watch_from() -> None:
    steps, (items, version) = drive(
        calls.list_objects("tfjobs", "ns", label_selector="a=b"), {"metadata": {"resourceVersion": "7"}}
    )
    assert (items, version) == ([], "7")
    assert only(steps).query == (("labelSelector", "a=b"),)


def test_events_are_those_of_the_object_oldest_first_whatever_the_server_sends() -> None:
    mine = {"involvedObject": {"name": "j", "uid": "u"}}
    answer = {
        "items": [
            {**mine, "lastTimestamp": "2026-01-01T00:00:02Z", "reason": "second"},
            {"involvedObject": {"name": "other"}, "lastTimestamp": "2026-01-01T00:00:00Z"},
            {**mine, "eventTime": "2026-01-01T00:00:01Z", "reason": "first"},
        ]
    }
    steps, events = drive(calls.list_events("ns", "j", "u"), answer)
    assert dict(only(steps).query) == {"fieldSelector": "involvedObject.name=j,involvedObject.uid=u"}
    assert [e["reason"] for e in events] == ["first", "second"]


def test_a_watch_continues_the_list_it_is_built_from() -> None:
    listed = calls.list_request("pods", "ns", "a=b", "status.phase=Running")
    watch = calls.watch_request("pods", "ns", "42", "a=b", "status.phase=Running", 300, True)
    assert (watch.method, watch.path) == (listed.method, listed.path)
    assert set(listed.query) < set(watch.query)
    assert dict(watch.query) == {
        "watch": "true",
        "timeoutSeconds": "300",
        "resourceVersion": "42",
        "allowWatchBookmarks": "true",
        "labelSelector": "a=b",
        "fieldSelector": "status.phase=Running",
    }
    bare = calls.watch_request("events", "ns", None, None, None, 60, False)
    assert dict(bare.query) == {"watch": "true", "timeoutSeconds": "60"}


def test_a_log_is_read_once_as_text_or_followed_unless_previous() -> None:
    steps, text = drive(calls.read_pod_log("ns", "p", "tensorflow", 0, False), b"a\n\xff\n")
    request = only(steps)
    assert (request.path, request.decode, text) == ("/api/v1/namespaces/ns/pods/p/log", "text", "a\n\ufffd\n")
    assert dict(request.query) == {"container": "tensorflow", "tailLines": "0"}  # 0 lines is asked for
    followed = calls.pod_log_request(
        "ns", "p", "c", since_time="2026-01-01T00:00:00Z", timestamps=True, follow=True
    )
    assert dict(followed.query) == {
        "container": "c",
        "follow": "true",
        "timestamps": "true",
        "sinceTime": "2026-01-01T00:00:00Z",
    }
    previous = calls.pod_log_request("ns", "p", "c", previous=True, follow=True)
    assert dict(previous.query) == {"container": "c", "previous": "true"}  # a dead container's log ends


def test_a_core_object_is_created_in_its_kinds_collection() -> None:
    service = {"kind": "Service", "metadata": {"name": "tb"}}
    request = only(drive(calls.create_core_object("ns", service), {})[0])
    assert (request.path, request.retry, request.what) == (
        "/api/v1/namespaces/ns/services",
        "write",
        "create Service ns/tb",
    )
    pod = only(drive(calls.create_core_object("ns", {"kind": "Pod", "metadata": {"name": "p"}}), {})[0])
    assert pod.path == "/api/v1/namespaces/ns/pods"
    assert drive(calls.get_service("ns", "tb"), Status(404))[1] is None


# -- Kueue ------------------------------------------------------------------------------------------


def workload(name: str, uid: str) -> dict:
    return {"metadata": {"name": name, "ownerReferences": [{"uid": uid}]}}


def group(*versions: str) -> dict:
    """The discovery document of kueue.x-k8s.io serving ``versions``."""
    return {"kind": "APIGroup", "versions": [{"version": v} for v in versions]}


WORKLOADS = "/apis/kueue.x-k8s.io/{}/namespaces/ns/workloads"


def test_the_workload_version_is_discovered_v1beta2_preferred_and_kept() -> None:
    version = kueue.WorkloadVersion()
    answer = {"items": [workload("mine", "u1"), workload("other", "u2"), "junk"]}
    steps, found = drive(kueue.list_workloads("ns", "u1", version), group("v1beta2", "v1beta1"), answer)
    assert [s.path for s in steps if isinstance(s, Request)] == ["/apis/kueue.x-k8s.io", WORKLOADS.format("v1beta2")]
    assert dict(steps[1].query) == {"labelSelector": "kueue.x-k8s.io/job-uid=u1"}  # type: ignore[union-attr]
    assert [w["metadata"]["name"] for w in found] == ["mine"]  # the label is a hint, the owner decides
    assert version.served == "v1beta2"
    steps, _ = drive(kueue.list_workloads("ns", "u1", version), {"items": []})
    assert only(steps).path == WORKLOADS.format("v1beta2")  # asked alone from then on


def test_a_v1beta1_only_cluster_is_read_at_v1beta1_and_handed_on_in_v1beta2s_shape() -> None:
    version = kueue.WorkloadVersion()
    old = {
        **workload("mine", "u1"),
        "spec": {"queueName": "q", "priorityClassName": "high",
                 "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass"},
        "status": {"accumulatedPastExexcutionTimeSeconds": 7, "admission": {"clusterQueue": "cq"}},
    }
    listed = {"apiVersion": "kueue.x-k8s.io/v1beta1", "items": [old]}
    steps, found = drive(kueue.list_workloads("ns", "u1", version), group("v1beta1"), listed)
    assert steps[1].path == WORKLOADS.format("v1beta1")  # type: ignore[union-attr]
    (mine,) = found
    assert mine["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert mine["spec"] == {
        "queueName": "q",
        "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
    }
    assert mine["status"] == {"accumulatedPastExecutionTimeSeconds": 7, "admission": {"clusterQueue": "cq"}}
    pod = kueue.as_v1beta2({"apiVersion": "kueue.x-k8s.io/v1beta1", "spec": {
        "priorityClassName": "p", "priorityClassSource": "scheduling.k8s.io/priorityclass"}})
    assert pod["spec"]["priorityClassRef"] == {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "p"}
    new = {"apiVersion": "kueue.x-k8s.io/v1beta2", "spec": {"priorityClassRef": {"name": "x"}}}
    assert kueue.as_v1beta2(new) is new


def test_a_known_version_that_answers_404_is_discovered_again_once() -> None:
    version = kueue.WorkloadVersion(served="v1beta1")  # Kueue upgraded to 0.20 since
    steps, found = drive(kueue.list_workloads("ns", "u1", version), Status(404), group("v1beta2"), {"items": []})
    assert [s.path for s in steps if isinstance(s, Request)] == [
        WORKLOADS.format("v1beta1"), "/apis/kueue.x-k8s.io", WORKLOADS.format("v1beta2")]
    assert (found, version.served) == ([], "v1beta2")
    version = kueue.WorkloadVersion(served="v1beta2")  # Kueue removed since
    steps, found = drive(kueue.list_workloads("ns", "u1", version), Status(404), Status(404))
    assert (len(steps), found, version.served) == (2, None, None)


def test_no_workload_api_is_none_asked_again_next_time_and_a_refusal_is_an_error() -> None:
    version = kueue.WorkloadVersion()
    assert drive(kueue.list_workloads("ns", "u", version), Status(404))[1] is None
    assert version.served is None  # Kueue may be installed later: discovered again
    assert drive(kueue.list_workloads("ns", "u", version), group())[1] is None  # the group, no version known
    with pytest.raises(Status):
        drive(kueue.list_workloads("ns", "u", kueue.WorkloadVersion()), group("v1beta2"), Status(403))


def test_the_version_is_shared_by_the_hooks_of_one_connection() -> None:
    class Hook:
        def __init__(self, conn_id: str, config_dict: dict | None = None) -> None:
            self.conn_id, self.config_file, self.cluster_context, self.in_cluster = conn_id, "/k", None, None
            self.config_dict = config_dict

    key = kueue.connection_of(Hook("shared-by-test"))
    assert kueue.workload_version(key) is kueue.workload_version(kueue.connection_of(Hook("shared-by-test")))
    assert kueue.workload_version(key) is not kueue.workload_version(kueue.connection_of(Hook("other-by-test")))
    inline = kueue.connection_of(Hook("shared-by-test", {"clusters": []}))
    assert inline is None and kueue.workload_version(inline) is not kueue.workload_version(inline)


def test_positions_404_asks_the_next_version_403_gives_none_at_once() -> None:
    steps, summary = drive(kueue.pending_workloads("ns", "q"), Status(404), {"items": [{"a": 1}]})
    assert [s.path for s in steps if isinstance(s, Request)] == [
        "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/ns/localqueues/q/pendingworkloads",
        "/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/ns/localqueues/q/pendingworkloads",
    ]
    assert summary == {"items": [{"a": 1}]}
    steps, summary = drive(kueue.pending_workloads("ns", "q"), Status(403))
    assert (len(steps), summary) == (1, None)
    assert drive(kueue.pending_workloads("ns", "q"), Status(404), Status(404))[1] is None
    with pytest.raises(Status):
        drive(kueue.pending_workloads("ns", "q"), Status(503))


def test_positions_are_retried_a_few_seconds_at_most() -> None:
    request = only(drive(kueue.pending_workloads("ns", "q"), {})[0])
    assert request.policy(RetryPolicy(timeout=240)).timeout == kueue.VISIBILITY_RETRY_TIMEOUT
    assert request.policy(RetryPolicy(timeout=1)).timeout == 1
    plain = only(drive(calls.get_job(TFJOB, "ns", "j"), {})[0])
    assert plain.policy(RetryPolicy(timeout=240)).timeout == 240


# -- the two executors ------------------------------------------------------------------------------


class Transport:
    """Stands for a hook's transport: records each request, answers from a list (an error is raised)."""

    def __init__(self, answers: list[Outcome]) -> None:
        self.answers = answers
        self.sent: list[Request] = []

    def __call__(self, request: Request) -> bytes:
        self.sent.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return json.dumps(answer).encode()


def sync_hook(answers: list[Outcome]) -> tuple[Any, Transport]:
    """A KubeflowJobHook whose one attempt of a request is answered by a Transport (no cluster, no connection)."""
    from airflow_tfjob.hooks.sync import KubeflowJobHook

    hook, transport = KubeflowJobHook(conn_id=None, api_retry_timeout=0), Transport(answers)
    hook._http = transport  # type: ignore[method-assign]
    return hook, transport


def async_hook(answers: list[Outcome]) -> tuple[Any, Transport]:
    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook

    hook, transport = AsyncKubeflowJobHook(conn_id=None, api_retry_timeout=0), Transport(answers)

    async def read(request: Request) -> bytes:
        return transport(request)

    hook._read = read  # type: ignore[method-assign]
    return hook, transport


def test_both_executors_run_a_description_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same answers through either hook: the same requests, the same result (a 404 read as None,
    the Workload version discovered once for the connection, which both hooks share)."""
    monkeypatch.setattr(kueue, "_BY_CONNECTION", {})
    sync, sent = sync_hook([group("v1beta2"), {"items": [workload("w", "u")]}, {"items": []}])
    first = sync.list_workloads("ns", "u")
    assert first == [{"apiVersion": "kueue.x-k8s.io/v1beta2", **workload("w", "u")}]
    assert sync.list_workloads("ns", "u") == []

    ahook, asent = async_hook([{"items": [workload("w", "u")]}, {"items": []}])

    async def twice() -> list[Any]:
        return [await ahook.list_workloads("ns", "u"), await ahook.list_workloads("ns", "u")]

    assert asyncio.run(twice()) == [first, []]
    assert asent.sent == sent.sent[1:] and len(sent.sent) == 3  # no second discovery


async def test_the_async_executor_raises_what_the_description_does_not_expect() -> None:
    hook, _ = async_hook([AsyncApiException(status=403, reason="Forbidden")])
    with pytest.raises(AsyncApiException):
        await hook.find_job("TFJob", "j", "ns")
    assert await async_hook([AsyncApiException(status=404)])[0].find_job("TFJob", "j", "ns") is None


def test_the_sync_executor_raises_what_the_description_does_not_expect() -> None:
    with pytest.raises(SyncApiException):
        sync_hook([SyncApiException(status=403, reason="Forbidden")])[0].find_job("TFJob", "j", "ns")
    assert sync_hook([SyncApiException(status=404)])[0].find_job("TFJob", "j", "ns") is None


# -- the shape of hooks/ ------------------------------------------------------------------------------


def test_no_function_is_bound_into_a_class_body_in_hooks() -> None:
    """Every method of a class in hooks/ is written in that class (a module function bound into a
    class body reads as a method but is defined and found elsewhere)."""
    bound = []
    for info in pkgutil.iter_modules(airflow_tfjob.hooks.__path__, "airflow_tfjob.hooks."):
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            for name, member in vars(cls).items():
                func = getattr(member, "__func__", member)
                if not inspect.isfunction(func) or not func.__module__.startswith("airflow_tfjob."):
                    continue  # what Python or a base class puts there (Protocol's __subclasshook__)
                if not func.__qualname__.startswith(f"{cls.__qualname__}."):
                    bound.append(f"{module.__name__}.{cls.__qualname__}.{name} = {func.__qualname__}")
    assert bound == []


# -- the preflight's questions (discovery of a group, any object, access reviews) ---------------------


def test_access_review_asks_one_verb_and_reads_allowed() -> None:
    steps, allowed = drive(calls.access_review("ns", "get", "", "pods/log"), {"status": {"allowed": True}})
    (request,) = steps
    assert isinstance(request, Request) and request.method == "POST"
    assert request.path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
    attributes = request.body["spec"]["resourceAttributes"]
    assert attributes == {
        "namespace": "ns",
        "verb": "get",
        "group": "",
        "resource": "pods",
        "subresource": "log",
    }
    assert allowed is True
    assert drive(calls.access_review("ns", "delete", "", "pods"), {"status": {}})[1] is False


RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "tensorflow-ps"},
    "spec": {"mlPolicy": {"numNodes": 1}},
}


def test_apply_object_creates_a_cluster_scoped_object() -> None:
    steps, done = drive(calls.apply_object("clustertrainingruntimes", RUNTIME), RUNTIME)
    request = only(steps)
    assert (request.method, request.path, request.body) == (
        "POST", "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes", RUNTIME
    )
    assert done == "created" and request.retry == "write" and 409 in request.absent


def test_apply_object_replaces_an_existing_one_at_the_version_it_read() -> None:
    current = {**RUNTIME, "metadata": {"name": "tensorflow-ps", "resourceVersion": "41"}}
    steps, done = drive(calls.apply_object("clustertrainingruntimes", RUNTIME, "ns"), Status(409), current, current)
    post, get, put = steps
    assert [s.method for s in (post, get, put)] == ["POST", "GET", "PUT"]  # type: ignore[union-attr]
    assert put.path == get.path == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/clustertrainingruntimes/tensorflow-ps"  # type: ignore[union-attr]
    assert put.body["metadata"] == {"name": "tensorflow-ps", "resourceVersion": "41"}  # type: ignore[union-attr]
    assert RUNTIME["metadata"] == {"name": "tensorflow-ps"}, "the caller's body is not changed"
    assert done == "replaced"


def test_apply_object_raises_what_is_not_a_conflict() -> None:
    with pytest.raises(Status):
        drive(calls.apply_object("clustertrainingruntimes", RUNTIME), Status(403))


def test_find_object_and_api_group_read_a_404_as_absent() -> None:
    steps, found = drive(calls.find_object("v1", "configmaps", "c", "kube"), Status(404))
    assert found is None and steps[0].path == "/api/v1/namespaces/kube/configmaps/c"  # type: ignore[union-attr]
    steps, _ = drive(calls.find_object("trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes", "r"), {})
    assert steps[0].path == "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/r"  # type: ignore[union-attr]
    assert drive(calls.api_group("kueue.x-k8s.io"), Status(404))[1] is None
    with pytest.raises(Status):
        drive(calls.find_object("v1", "configmaps", "c", "kube"), Status(403))


def test_both_executors_review_access_alike() -> None:
    sync, sent = sync_hook([{"status": {"allowed": True}}])
    ahook, asent = async_hook([{"status": {"allowed": True}}])
    assert sync.access_review("list", "", "pods", "ns") is True
    assert asyncio.run(ahook.access_review("list", "", "pods", "ns")) is True
    assert asent.sent == sent.sent
