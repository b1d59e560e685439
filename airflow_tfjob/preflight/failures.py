"""A refused submission explained (the operator's failure at submit time, whatever its ``preflight``):
a 403 from an admission webhook (a TrainJob whose runtime does not exist), a 404 for a kind the cluster
does not serve, a verb the Role denies become one message naming the missing part and its fix, found
by the same checks as the preflight, instead of the client's exception and the server's raw body."""

from __future__ import annotations

import re

from airflow_tfjob.hooks.common import api_status, status_of
from airflow_tfjob.preflight.checks import Cluster, check
from airflow_tfjob.preflight.needs import ROLE_FILE, Target

#: What the cluster says when a request is refused for what the cluster lacks, not for the job itself.
EXPLAINED = frozenset({403, 404})
_RBAC = re.compile(r'cannot (?P<verb>\w+) resource "(?P<resource>[^"]+)" in API group "(?P<group>[^"]*)"')


def explain(error: BaseException, cluster: Cluster, namespace: str, target: Target, doing: str) -> str | None:
    """The message for `error`, raised while `doing` (e.g. "submitting TFJob ns/name"); None when it is
    not a refusal the preflight knows about (the caller re-raises it as it is)."""
    status = api_status(error)
    if status not in EXPLAINED:
        return None
    said = str(status_of(error).get("message") or getattr(error, "reason", "") or error).strip()
    head = f"The cluster refused {doing} ({status}): {said}"
    try:
        report = check(cluster, namespace, [target])
    except Exception as failed:  # the explanation must not hide the refusal
        return f"{head}\n{_unasked(failed, status, namespace)}"
    missing = report.blocking_missing
    if missing:
        parts = "; ".join(f.part for f in missing)
        return f"{head}\nMissing: {parts}. Each with its fix:\n{report.table(only_missing=True)}"
    if status == 404 and f'namespaces "{namespace}" not found' in said:
        # The preflight asks about the job's API and runtime, not the namespace the job names.
        return (
            f"{head}\nMissing: namespace {namespace!r}. Fix: create it (kubectl create namespace {namespace}), "
            "or set namespace= (or the connection's namespace) to one that exists"
        )
    denied = _RBAC.search(said)
    if denied:
        return (
            f"{head}\nMissing: the permission to {denied['verb']} {denied['resource']} "
            f'(API group "{denied["group"]}"). Fix: kubectl apply -n {namespace} -f {ROLE_FILE} and '
            "bind the Role to the connection's user"
        )
    return f"{head}\n(the preflight finds every part the job needs; the message above is the server's)"


def _unasked(failed: BaseException, status: int, namespace: str) -> str:
    """One line when the preflight could not ask either: the client's exception carries the server's
    headers and body, which say nothing the status does not."""
    asked = api_status(failed)
    why = f"{asked} {getattr(failed, 'reason', '') or ''}".strip() if asked else type(failed).__name__
    if status == 404:
        return (
            f"Check that namespace {namespace!r} exists (kubectl get namespace {namespace}) and that the "
            f"connection points at the cluster you mean (the preflight could not ask what is missing: {why})"
        )
    return f"(the preflight could not ask what is missing: {why})"
