"""Role-based authorisation for the local API server (aiohttp middleware after authentication).

Users are bound to Roles and ClusterRoles read from YAML files, e.g. the shipped
``airflow_tfjob/rbac/role.yaml`` as-is: ``roles={"airflow": ["role.yaml"]}``. A Role applies in its
``metadata.namespace``, or in ``default`` when it has none (as ``kubectl apply`` without ``-n``); give
``(path, namespace)`` to apply it elsewhere (as ``kubectl apply -n``). A ClusterRole applies everywhere.
Other documents in the files (RoleBindings, ServiceAccounts) are ignored: the mapping is the binding.
A user with no entry in the mapping is an administrator, so clusters without roles behave as before.

Rules are evaluated as kube-apiserver does for resource requests: apiGroups, resources (``pods/log``,
``tfjobs/status``, ``*``, ``*/status``), verbs (``list`` and ``watch`` are distinct; ``*``) and
resourceNames. Non-resource requests (discovery, /version, /metrics) are allowed to every
authenticated user (a real server checks nonResourceURLs; discovery is open to all users there too).
A denied request gets the server's 403 Forbidden Status; denials are counted for /metrics.
A SelfSubjectAccessReview (``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews``, open to
every authenticated user as on a real server) is answered from the same rules: what a client may do,
asked without doing it (the provider's preflight asks one per verb it uses). Allowed
resource requests are counted too, by user, verb, API group and resource: what a user actually used,
so that a test can hold a Role to what its features need (tests/integration/test_rbac_role.py).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from airflow_tfjob.local.apiserver.auth import USER_KEY
from airflow_tfjob.local.apiserver.request import parse_resource_path
from airflow_tfjob.local.apiserver.requestmetrics import classify
from airflow_tfjob.local.model.resources import ApiError
from airflow_tfjob.local.yamlfile import check_metadata, load_labelled

METRIC = "tfjob_local_forbidden_total"
RoleSource = str | Path | tuple[str | Path, str]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_VERB = {"GET": "get", "LIST": "list", "WATCH": "watch", "POST": "create", "PUT": "update", "PATCH": "patch",
         "DELETE": "delete", "DELETECOLLECTION": "deletecollection"}


@dataclass(frozen=True)
class Rule:
    api_groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    resource_names: frozenset[str]

    def allows(self, group: str, resource: str, verb: str, name: str | None) -> bool:
        sub = resource.partition("/")[2]
        return (
            bool({"*", group} & self.api_groups)
            and (bool({"*", resource} & self.resources) or (sub != "" and f"*/{sub}" in self.resources))
            and bool({"*", verb} & self.verbs)
            and (not self.resource_names or (name is not None and name in self.resource_names))
        )


@dataclass(frozen=True)
class Grant:
    """The rules of one Role (in `namespace`) or ClusterRole (`namespace` None: everywhere)."""

    name: str
    namespace: str | None
    rules: tuple[Rule, ...]


def _strings(rule: Mapping[str, Any], key: str, where: str) -> frozenset[str]:
    value = rule.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: rules[].{key} must be a list of strings, got {value!r}")
    return frozenset(value)


RULE_KEYS = ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs")


def load_grants(source: RoleSource, option: str = "roles") -> list[Grant]:
    """The Roles and ClusterRoles in one YAML file (a clear error naming the file when it has none);
    ``option`` names where the file was given (``--role`` on the command line)."""
    path, namespace = (Path(source[0]), source[1]) if isinstance(source, tuple) else (Path(source), None)
    grants = []
    for label, doc in load_labelled(path, option):
        if not isinstance(doc, dict) or doc.get("kind") not in ("Role", "ClusterRole"):
            continue
        kind = doc["kind"]
        name = check_metadata(doc, f"{option} {path} {label} ({kind})")
        meta = doc["metadata"]
        where = f"{option} {path} {kind} {name}"
        rules = []
        raw_rules = doc.get("rules") or []
        if not isinstance(raw_rules, list):
            raise ValueError(f"{where}: rules must be a list of rules, e.g. rules: [{{verbs: [get], ...}}]")
        for j, rule in enumerate(raw_rules):
            if not isinstance(rule, dict):
                raise ValueError(f"{where}: each rule must be a mapping")
            unknown = sorted(str(k) for k in rule if k not in RULE_KEYS)
            if unknown:
                # A misspelt key (verb:) would leave a rule granting nothing, and the user wondering why.
                raise ValueError(f"{where}: rules[{j}] has unknown key {unknown[0]!r}; a rule's keys are "
                                 f"{', '.join(RULE_KEYS)} (e.g. verbs: [get, list])")
            rule_verbs = _strings(rule, "verbs", where)
            if not rule_verbs:
                raise ValueError(f"{where}: rules[{j}] has no verbs, so it grants nothing; list them, "
                                 "e.g. verbs: [get, list]")
            rules.append(Rule(_strings(rule, "apiGroups", where), _strings(rule, "resources", where),
                              rule_verbs, _strings(rule, "resourceNames", where)))
        scope = None if kind == "ClusterRole" else (namespace or meta.get("namespace") or "default")
        grants.append(Grant(name, scope, tuple(rules)))
    if not grants:
        raise ValueError(f"{option} {path} holds no Role or ClusterRole; give a file like airflow_tfjob/rbac/role.yaml")
    return grants


@dataclass(frozen=True)
class Attributes:
    """What a resource request asks to do, in RBAC's terms."""

    verb: str
    group: str
    resource: str  # with its subresource: "pods/log"
    namespace: str | None
    name: str | None

    def forbidden(self, user: str) -> ApiError:
        plural = self.resource.split("/", 1)[0]
        qualified = f"{plural}.{self.group}" if self.group else plural
        target = f'{qualified} "{self.name}"' if self.name else qualified
        scope = f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        message = (f'{target} is forbidden: User "{user}" cannot {self.verb} resource "{self.resource}" '
                   f'in API group "{self.group}" {scope}')
        details: dict[str, Any] = {"group": self.group, "kind": plural}
        if self.name:
            details["name"] = self.name
        return ApiError(403, "Forbidden", message, details)


def request_attributes(request: web.Request) -> Attributes | None:
    """The request's RBAC attributes, or None for a non-resource request (or a URL that will 404)."""
    verb = _VERB.get(classify(request.method, request.path, request.query)[0])
    parts = [p for p in request.path.split("/") if p]
    if verb is None or len(parts) < 3:
        return None
    group, version, rest = ("", parts[1], parts[2:]) if parts[0] == "api" else (parts[1], parts[2], parts[3:])
    if group == VISIBILITY_GROUP:
        return _visibility_attributes(verb, rest)
    try:
        p = parse_resource_path(group, version, rest)
    except ApiError:
        return None
    resource = f"{p.info.plural}/{p.subresource}" if p.subresource else p.info.plural
    name = p.name if verb != "create" else None
    return Attributes(verb, group, resource, p.namespace if p.info.namespaced else None, name)


VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"


def _visibility_attributes(verb: str, rest: list[str]) -> Attributes | None:
    """Kueue's visibility API (an aggregated API): `clusterqueues/pendingworkloads` on a ClusterQueue,
    `localqueues/pendingworkloads` on a LocalQueue in its namespace."""
    if len(rest) == 3 and rest[0] == "clusterqueues":
        return Attributes(verb, VISIBILITY_GROUP, f"clusterqueues/{rest[2]}", None, rest[1])
    if len(rest) == 5 and rest[0] == "namespaces" and rest[2] == "localqueues":
        return Attributes(verb, VISIBILITY_GROUP, f"localqueues/{rest[4]}", rest[1], rest[3])
    return None


ACCESS_REVIEW_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


async def access_review(request: web.Request, allowed: Callable[[Attributes], bool]) -> web.Response:
    """The SelfSubjectAccessReview in the request, answered with `allowed` (status.allowed, and the
    reason a real server's RBAC authorizer gives)."""
    if request.method != "POST":
        return web.json_response(ApiError(405, "MethodNotAllowed", "the server does not allow this method "
                                           "on the requested resource").status(), status=405)
    try:
        review = await request.json()
        attrs = review["spec"]["resourceAttributes"]
    except (ValueError, KeyError, TypeError):
        return web.json_response(ApiError(400, "BadRequest", "spec.resourceAttributes: Required value").status(),
                                 status=400)
    resource = str(attrs.get("resource") or "")
    if attrs.get("subresource"):
        resource = f"{resource}/{attrs['subresource']}"
    asked = Attributes(str(attrs.get("verb") or ""), str(attrs.get("group") or ""), resource,
                       attrs.get("namespace") or None, attrs.get("name") or None)
    verdict = allowed(asked)
    status: dict[str, Any] = {"allowed": verdict}
    if verdict:
        status["reason"] = "RBAC: allowed"
    review["status"] = status
    review.setdefault("metadata", {})
    return web.json_response(review, status=201)


class Authorizer:
    """Users' grants, the middleware, and the denial counters (read from any thread)."""

    def __init__(self, roles: Mapping[str, Sequence[RoleSource]]) -> None:
        self.grants: dict[str, list[Grant]] = {
            user: [g for source in sources for g in load_grants(source)] for user, sources in roles.items()
        }
        self._lock = threading.Lock()
        self._denied: Counter[tuple[str, str, str, str]] = Counter()
        self._allowed: Counter[tuple[str, str, str, str, str]] = Counter()

    def allowed(self, user: str, attrs: Attributes) -> bool:
        grants = self.grants.get(user)
        if grants is None:
            return True  # no roles configured for this user: an administrator
        return any(
            rule.allows(attrs.group, attrs.resource, attrs.verb, attrs.name)
            for grant in grants if grant.namespace is None or grant.namespace == attrs.namespace
            for rule in grant.rules
        )

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        user = request.get(USER_KEY)
        if request.path.rstrip("/") == ACCESS_REVIEW_PATH and user is not None:
            return await access_review(request, lambda attrs: self.allowed(user, attrs))
        attrs = request_attributes(request)
        if attrs is not None and user is not None:
            if not self.allowed(user, attrs):
                with self._lock:
                    self._denied[(user, attrs.verb, attrs.resource, attrs.namespace or "")] += 1
                error = attrs.forbidden(user)
                return web.json_response(error.status(), status=403)
            with self._lock:
                self._allowed[(user, attrs.verb, attrs.group, attrs.resource, attrs.namespace or "")] += 1
        return await handler(request)

    def denied(self) -> dict[tuple[str, str, str, str], int]:
        """403s so far by (user, verb, resource incl. subresource, namespace)."""
        with self._lock:
            return dict(self._denied)

    def allowed_requests(self) -> dict[tuple[str, str, str, str, str], int]:
        """Authorised resource requests so far by (user, verb, API group, resource incl. subresource,
        namespace), administrators' included; counted before the handler runs, so a 404 counts too
        (the permission was used)."""
        with self._lock:
            return dict(self._allowed)

    def render(self) -> str:
        lines = [f"# HELP {METRIC} Requests denied by RBAC.", f"# TYPE {METRIC} counter"]
        lines += [f'{METRIC}{{user="{u}",verb="{v}",resource="{r}",namespace="{n}"}} {c}'
                  for (u, v, r, n), c in sorted(self.denied().items())]
        return "\n".join(lines) + "\n"
