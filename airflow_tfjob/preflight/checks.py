"""The checks: what the targets need, asked of the cluster through a hook (discovery, reads and
SelfSubjectAccessReviews; nothing is created), answered as a Report.

What differs between kinds comes from the kind table (group, version, plural, Kueue framework name) and
from preflight/needs.py (each API's install, runtimes, companions); nothing here names an API.
An answer the cluster refuses (403) makes the part "unknown" (a warning), never a crash; any other
failure (the server is down) is the caller's to report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, Protocol, TypeVar

from airflow_tfjob.hooks.common import api_status
from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.preflight import needs
from airflow_tfjob.preflight.needs import Target
from airflow_tfjob.preflight.report import Finding, Report

T = TypeVar("T")
#: Statuses that mean "you may not read this" rather than "the cluster is broken".
REFUSED = frozenset({401, 403})


class Cluster(Protocol):
    """The hook's calls the checks use (hooks/sync.py's KubeflowJobHook has them)."""

    def served_resources(self, group_version: str) -> set[str] | None: ...

    def api_group(self, group: str) -> dict | None: ...

    def find_object(
        self, api_version: str, plural: str, name: str, namespace: str | None = None
    ) -> dict | None: ...

    def access_review(
        self, verb: str, group: str, resource: str, namespace: str | None = None, *, cluster_scoped: bool = False
    ) -> bool: ...


def _refused(ask: Callable[..., T], *args: Any) -> tuple[T | None, int | None]:
    """(``ask(*args)``, None), or (None, the status) when the cluster refuses to answer."""
    try:
        return ask(*args), None
    except Exception as error:
        status = api_status(error)
        if status in REFUSED:
            return None, status
        raise


def _versions(group_doc: dict | None) -> str:
    if not group_doc:
        return "not served"
    versions = [str(v.get("version")) for v in group_doc.get("versions") or [] if isinstance(v, dict)]
    preferred = (group_doc.get("preferredVersion") or {}).get("version")
    shown = ", ".join(versions) or "none"
    return f"{group_doc.get('name', '?')} serves {shown}" + (f" (preferred {preferred})" if preferred else "")


def check(
    cluster: Cluster,
    namespace: str,
    targets: Sequence[Target],
    connect: Callable[[str], Cluster] | None = None,
) -> Report:
    """Every part the targets need, once each, in the order: APIs and kinds, companions, runtimes,
    Kueue, the Role's verbs, then MultiKueue's worker clusters (``connect``: a worker's cluster from its
    Airflow connection id; None: the workers are listed, not asked)."""
    wanted = tuple(targets)
    return Report.of(
        [
            *_kinds(cluster, wanted),
            *_runtimes(cluster, namespace, wanted),
            *_kueue(cluster, namespace, wanted),
            *_skew(cluster, wanted),
            *_verbs(cluster, namespace, wanted),
            *_workers(cluster, namespace, wanted, connect),
        ]
    )


def _kueue_object(cluster: Cluster, plural: str, name: str, namespace: str | None = None) -> dict | None:
    """A Kueue object in the first version the cluster serves it in (None: absent, or refused)."""
    for version in needs.KUEUE_VERSIONS:
        found, refused = _refused(cluster.find_object, f"{needs.KUEUE_GROUP}/{version}", plural, name, namespace)
        if found is not None or refused is not None:
            return found
    return None


def multikueue_workers(cluster: Cluster, namespace: str, queue: str) -> list[str] | None:
    """The worker clusters a LocalQueue's jobs may run on: those of the MultiKueueConfig that a
    MultiKueue AdmissionCheck of its ClusterQueue names (None: the queue dispatches to no worker)."""
    local = _kueue_object(cluster, "localqueues", queue, namespace)
    cq_name = ((local or {}).get("spec") or {}).get("clusterQueue")
    cq = _kueue_object(cluster, "clusterqueues", str(cq_name)) if cq_name else None
    spec = (cq or {}).get("spec") or {}
    names = [str(n) for n in spec.get("admissionChecks") or ()]
    names += [str(c.get("name")) for c in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or ()
              if isinstance(c, dict) and c.get("name")]
    workers: list[str] | None = None
    for name in dict.fromkeys(names):
        ac = _kueue_object(cluster, "admissionchecks", name)
        ac_spec = (ac or {}).get("spec") or {}
        if ac_spec.get("controllerName") != needs.MULTIKUEUE_CONTROLLER:
            continue
        config_name = (ac_spec.get("parameters") or {}).get("name")
        config = _kueue_object(cluster, "multikueueconfigs", str(config_name)) if config_name else None
        workers = [*(workers or []), *(str(c) for c in ((config or {}).get("spec") or {}).get("clusters") or ())]
    return list(dict.fromkeys(workers)) if workers is not None else None


def _workers(
    cluster: Cluster, namespace: str, targets: tuple[Target, ...], connect: Callable[[str], Cluster] | None
) -> Iterator[Finding]:
    """When a queue the jobs ask for dispatches through MultiKueue: the manager's row (the ClusterRole the
    follow reads MultiKueueClusters with), then one row per worker cluster of each such queue: its
    connection mapped, reachable, the job's kind served there, the verbs the follow reads the replicas
    with allowed."""
    rows = [
        (worker, target)
        for target in targets
        if target.queue
        for worker in multikueue_workers(cluster, namespace, target.queue) or ()
    ]
    if rows:
        yield _manager(cluster)
    for worker, target in rows:
        yield _worker(worker, namespace, target, connect)


def _manager(cluster: Cluster) -> Finding:
    """The shipped MultiKueue ClusterRole's verbs, asked at the cluster scope of the manager (the job
    connection's cluster): refused, a lost worker would not end the task's follow."""
    part = f"MultiKueue on the manager ({needs.MULTIKUEUE_ROLE_FILE})"
    grants = needs.multikueue_grants()
    denied = []
    for grant in grants:
        allowed, refused = _refused(partial(cluster.access_review, cluster_scoped=True), grant.verb, grant.group,
                                    grant.resource)
        if refused is not None:
            return Finding(part, f"cannot tell: a SelfSubjectAccessReview was refused ({refused})", "unknown",
                           "check the connection's credentials", blocking=False)
        if not allowed:
            denied.append(str(grant))
    if denied:
        return Finding(
            part, f"{len(grants) - len(denied)} of {len(grants)} verbs allowed cluster-wide",
            f"{', '.join(denied)} at the cluster scope (the follow reads the worker's MultiKueueCluster: "
            "without it a lost worker does not end the task)",
            f"kubectl apply -f {needs.MULTIKUEUE_ROLE_FILE} and bind the ClusterRole to the job connection's "
            "user (the file's ClusterRoleBinding)",
            blocking=False,
        )  # fmt: skip
    return Finding(part, f"the {len(grants)} cluster-wide verbs the follow uses allowed")


def _worker(worker: str, namespace: str, target: Target, connect: Callable[[str], Cluster] | None) -> Finding:
    kind = target.kind
    part = f"MultiKueue worker {worker} ({kind.kind})"
    conn_id = dict(target.workers).get(worker)
    if conn_id is None:
        return Finding(
            part, "no connection mapped",
            f"a connection to read the replicas' lines and events on {worker} (the task follows the status only)",
            f"add an Airflow kubernetes connection for {worker} and map it: multikueue_connections="
            f"{{{worker!r}: '<conn id>'}} (the operator's, or the job connection's extra)",
            blocking=False,
        )  # fmt: skip
    if connect is None:
        return Finding(part, f"connection {conn_id} (not asked)")
    try:
        there = connect(conn_id)
        served = there.served_resources(kind.api_version)
    except Exception as error:
        status = api_status(error)
        said = f"answered {status}" if status else "did not answer"
        return Finding(
            part, f"connection {conn_id}: the worker {said}", "the worker cluster, unreachable: cannot tell",
            f"check connection {conn_id} (its kubeconfig, server and credentials) and the cluster",
            blocking=False,
        )  # fmt: skip
    if kind.plural not in (served or set()):
        api = needs.api_of(kind)
        return Finding(
            part, f"connection {conn_id}: {kind.api_version} does not serve {kind.plural}",
            f"{kind.kind} on the worker: MultiKueue cannot run the job's copy there",
            f"install {api.name} on {worker}: {api.install}",
        )  # fmt: skip
    grants = (*needs.WORKER_GRANTS, ("get", kind.group, kind.plural))
    denied = []
    for verb, group, resource in grants:
        allowed, refused = _refused(there.access_review, verb, group, resource, namespace)
        if refused is not None or not allowed:
            denied.append(f"{verb} {resource}" + (f".{group}" if group else ""))
    reach = f"connection {conn_id}: reachable, {kind.plural} served"
    if denied:
        return Finding(
            part, f"{reach}, {len(grants) - len(denied)} of {len(grants)} verbs allowed",
            f"{', '.join(denied)} in {namespace} there (the follow reads the replicas with them)",
            f"on {worker}: kubectl apply -n {namespace} -f {needs.ROLE_FILE} and bind the Role to "
            f"connection {conn_id}'s user",
            blocking=False,
        )  # fmt: skip
    return Finding(part, f"{reach}, the {len(grants)} verbs the follow uses allowed")


def _kinds(cluster: Cluster, targets: tuple[Target, ...]) -> Iterator[Finding]:
    groups: dict[str, dict | None] = {}
    for kind in dict.fromkeys(t.kind for t in targets):
        api = needs.api_of(kind)
        if kind.group not in groups:
            groups[kind.group] = cluster.api_group(kind.group)
        served = cluster.served_resources(kind.api_version) or set()
        there = f"{api.name}: {_versions(groups[kind.group])}" + _installed_version(cluster, api)
        if kind.plural in served:
            yield Finding(f"{kind.kind} ({kind.api_version})", there + f"; {kind.plural} served")
        else:
            yield Finding(
                f"{kind.kind} ({kind.api_version})",
                there,
                f"{kind.api_version} does not serve {kind.plural}: {api.name} is not installed",
                f"install {api.name}: {api.install}",
            )
        for group, _plural, name, fix in api.companions:
            if group not in groups:
                groups[group] = cluster.api_group(group)
            doc = groups[group]
            if doc is None:
                yield Finding(
                    f"{name} ({group})", "not served", f"{name}, which {api.name} runs jobs on", fix
                )
            else:
                yield Finding(f"{name} ({group})", _versions(doc))


def _installed_version(cluster: Cluster, api: needs.Api) -> str:
    """The installed release where its install records one (Trainer's ConfigMap), readable or not."""
    version = _recorded_release(cluster, api)
    return f"; release {version}" if version else ""


def _runtimes(cluster: Cluster, namespace: str, targets: tuple[Target, ...]) -> Iterator[Finding]:
    seen = set()
    for target in targets:
        api = needs.api_of(target.kind)
        if api.runtimes is None or not target.runtime or (target.runtime, target.runtime_kind) in seen:
            continue
        seen.add((target.runtime, target.runtime_kind))
        group_version, _ = api.runtimes
        plural = needs.RUNTIME_PLURALS.get(target.runtime_kind, api.runtimes[1])
        scope = namespace if plural != api.runtimes[1] else None
        part = f"{target.runtime_kind} {target.runtime}"
        runtime, refused = _refused(cluster.find_object, group_version, plural, target.runtime, scope)
        if refused is not None:
            yield Finding(
                part,
                f"cannot tell: reading {plural} was refused ({refused})",
                "unknown",
                needs.runtime_fix(target.runtime, target.runtime_kind),
                blocking=False,
            )
        elif runtime is None:
            yield Finding(
                part,
                "not found",
                f"the runtime {target.kind.kind} "
                + (f"{target.source} " if target.source else "")
                + "runs on",
                needs.runtime_fix(target.runtime, target.runtime_kind),
            )
        else:
            labels = (runtime.get("metadata") or {}).get("labels") or {}
            framework = labels.get("trainer.kubeflow.org/framework")
            yield Finding(part, "installed" + (f" (framework {framework})" if framework else ""))
            yield from _replicated_job_names(cluster, api, runtime, part, target)


def _replicated_job_names(
    cluster: Cluster, api: needs.Api, runtime: dict, part: str, target: Target
) -> Iterator[Finding]:
    """A runtime's ReplicatedJob names against the limit its API's later releases enforce: MISSING on a
    release that refuses them, a warning before it (the upgrade will), nothing when all fit."""
    if api.replicated_job_name_limit is None:
        return
    since, limit = api.replicated_job_name_limit
    names = needs.replicated_job_names(runtime)
    long = [n for n in names if len(n) > limit]
    if not long:
        return
    recorded = _recorded_release(cluster, api)
    release = needs.release_of(recorded)
    shown = ", ".join(f"{n} ({len(n)})" for n in long)
    later = f"{since[0]}.{since[1]}"
    row = f"{part}: ReplicatedJob names"
    fix = needs.replicated_job_name_fix(long, limit, target.runtime or "", target.runtime_kind)
    of = recorded if release is not None else "of an unknown release" + (f" ({recorded})" if recorded else "")
    there = f"{shown} over {limit} characters; {api.releases} {of}"
    if release is not None and release >= since:
        missing = (f"{api.releases} {later}+ refuses ReplicatedJob names over {limit} characters "
                   f"({needs.REPLICATED_JOB_NAME_SOURCE})")
        yield Finding(row, there, missing, fix)
    else:
        missing = (f"will be refused after upgrading to {api.releases} {later} "
                   f"({needs.REPLICATED_JOB_NAME_SOURCE})")
        yield Finding(row, there, missing, fix + f", before upgrading to {later}", blocking=False)


def _recorded_release(cluster: Cluster, api: needs.Api) -> str | None:
    """The release the API's install records (None: it records none, or reading it was refused)."""
    if api.version_config is None:
        return None
    namespace, name, key = api.version_config
    config, _ = _refused(cluster.find_object, "v1", "configmaps", name, namespace)
    version = ((config or {}).get("data") or {}).get(key)
    return str(version) if version else None


def _kueue(cluster: Cluster, namespace: str, targets: tuple[Target, ...]) -> Iterator[Finding]:
    queued = {t.kind for t in targets if t.queue}
    doc = cluster.api_group(needs.KUEUE_GROUP)
    if doc is None:
        if queued:
            yield Finding(
                "Kueue",
                "not served",
                "Kueue, which the jobs with a queue (kueue_queue) ask for",
                f"install Kueue: {needs.KUEUE_INSTALL}; or drop kueue_queue",
            )
        return
    yield Finding("Kueue", _versions(doc))
    config_namespace, name, _ = needs.KUEUE_CONFIG
    config, refused = _refused(cluster.find_object, "v1", "configmaps", name, config_namespace)
    frameworks = needs.frameworks_of(config) if config is not None else None
    for kind in dict.fromkeys(t.kind for t in targets):
        yield _integration(kind, kind in queued, frameworks, config is not None, refused)
    unqueued = {t.kind for t in targets if not t.queue and t.kind.kueue_framework in (frameworks or [])}
    if config is not None and unqueued:
        yield from _without_queue(cluster, namespace, unqueued, needs.unqueued_of(config))


def _without_queue(
    cluster: Cluster, namespace: str, kinds: set[JobKind], config: needs.Unqueued
) -> Iterator[Finding]:
    """A job without a queue whose kind Kueue integrates: with manageJobsWithoutQueueName on in a namespace
    its selector matches, Kueue suspends the job and queues it in LocalQueue ``default``; without that
    LocalQueue it is never admitted (QuotaReserved=False, "LocalQueue  doesn't exist")."""
    if not config.manages:
        return
    ns_doc, refused = _refused(cluster.find_object, "v1", "namespaces", namespace)
    for kind in sorted(kinds, key=lambda k: k.kind):
        part = f"Kueue for {kind.kind} without a queue"
        if refused is not None:
            yield Finding(part, f"manageJobsWithoutQueueName on; reading namespace {namespace} was refused "
                          f"({refused})", "unknown", needs.unqueued_fix(namespace), blocking=False)
            continue
        labels = ((ns_doc or {}).get("metadata") or {}).get("labels")
        if not config.selects(namespace, labels):
            yield Finding(part, f"manageJobsWithoutQueueName on; {namespace} is not a managed namespace")
            continue
        default = _kueue_object(cluster, "localqueues", needs.DEFAULT_LOCAL_QUEUE, namespace)
        if default is not None:
            yield Finding(part, f"manageJobsWithoutQueueName on: queued in LocalQueue "
                          f"{needs.DEFAULT_LOCAL_QUEUE!r} of {namespace}")
            continue
        yield Finding(
            part,
            f"manageJobsWithoutQueueName on for {namespace}; no LocalQueue {needs.DEFAULT_LOCAL_QUEUE!r} there",
            f"Kueue suspends a {kind.kind} without kueue_queue and never admits it "
            f"(\"LocalQueue  doesn't exist\")",
            needs.unqueued_fix(namespace),
        )


def _skew(cluster: Cluster, targets: tuple[Target, ...]) -> Iterator[Finding]:
    """Whether the Kueue and the Trainer the cluster serves fit together: Kueue's line read from the
    versions it serves, Trainer's release from its install's ConfigMap. Blocking for a TrainJob that asks
    for a queue (the integration is what admits it); a warning otherwise."""
    trainer_api = needs.APIS[needs.TRAINER_API]
    trainjobs = [t for t in targets if t.kind.api == needs.TRAINER_API]
    if not trainjobs or trainer_api.version_config is None:
        return
    kueue = cluster.api_group(needs.KUEUE_GROUP)
    if kueue is None or cluster.api_group(needs.TRAINER_API) is None:
        return
    versions = [str(v.get("version")) for v in kueue.get("versions") or [] if isinstance(v, dict)]
    queued = any(t.queue for t in trainjobs)
    part = "Kueue with Trainer"
    line = needs.kueue_line(versions)
    needed, why = needs.trainer_needed(versions)
    wanted = f"{needed[0]}.{needed[1]}"
    fix = f"upgrade Trainer to {wanted} or later: {needs.TRAINER_INSTALL}"
    namespace, name, key = trainer_api.version_config
    config, refused = _refused(cluster.find_object, "v1", "configmaps", name, namespace)
    recorded = ((config or {}).get("data") or {}).get(key)
    release = needs.release_of(recorded)
    if release is None:
        said = f"reading {namespace}/{name} was refused ({refused})" if refused else (
            f"{namespace}/{name} records no release" if config is not None else f"{namespace}/{name} not found")
        yield Finding(part, f"{line} with Trainer of an unknown release ({said})", "unknown",
                      f"check that Trainer is {wanted} or later ({why}); if not, {fix}", blocking=False)
    elif release < needed:
        shown = f"{release[0]}.{release[1]}"
        effect = ("the job's TrainJob may never be admitted" if queued
                  else "a TrainJob with a queue may never be admitted")
        yield Finding(part, f"{line} with Trainer {recorded}",
                      f"Trainer {wanted}+ for this Kueue, found {shown}: {why}; {effect}", fix,
                      blocking=queued)
    else:
        yield Finding(part, f"{line} with Trainer {recorded}: they fit")


def _integration(
    kind: JobKind, queued: bool, frameworks: list[str] | None, read: bool, refused: int | None
) -> Finding:
    part = f"Kueue integration {kind.kueue_framework}"
    effect = (
        "the job's queue label is ignored: it runs outside quota"
        if queued
        else "a queue label would be ignored"
    )
    namespace, name, _ = needs.KUEUE_CONFIG
    if not read:
        why = (
            f"reading {namespace}/{name} was refused ({refused})"
            if refused
            else f"{namespace}/{name} not found"
        )
        return Finding(
            part,
            f"cannot tell: {why}",
            "unknown",
            "ask a cluster admin whether it is on; " + needs.integration_fix(kind),
            blocking=False,
        )
    # Without integrations.frameworks Kueue manages batch/job only (its built-in default).
    if kind.kueue_framework in (frameworks or []):
        return Finding(part, "on")
    default = needs.OFF_BY_DEFAULT.get(kind.api)
    there = f"off ({default})" if default else "off"
    return Finding(part, there, effect, needs.integration_fix(kind), blocking=queued)


def _verbs(cluster: Cluster, namespace: str, targets: tuple[Target, ...]) -> Iterator[Finding]:
    grants = needs.grants_for(targets)
    allowed = 0
    denied = []
    for grant in grants:
        answer, refused = _refused(cluster.access_review, grant.verb, grant.group, grant.resource, namespace)
        if refused is not None:
            yield Finding(
                f"Role ({needs.ROLE_FILE})",
                f"cannot tell: a SelfSubjectAccessReview was refused ({refused})",
                "unknown",
                "check the connection's credentials",
                blocking=False,
            )
            return
        if answer:
            allowed += 1
        else:
            denied.append(grant)
    yield Finding(
        f"Role ({needs.ROLE_FILE})", f"{allowed} of {len(grants)} verbs the jobs use allowed in {namespace}"
    )
    for grant in denied:
        needed_for = grant.optional_for
        yield Finding(
            f"verb: {grant}",
            "denied",
            f"{grant} in {namespace}" + (f" (needed for {needed_for} only)" if needed_for else ""),
            f"grant it to the connection's user: kubectl apply -n {namespace} -f {needs.ROLE_FILE} "
            "and bind the Role to that user (the file's RoleBinding)",
            blocking=needed_for is None,
        )
