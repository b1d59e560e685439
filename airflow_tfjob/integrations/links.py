"""Extra links shown on the job operators' tasks in the Airflow UI: "TensorBoard" and one "Logs <replica>"
per replica (``Logs worker-0``...).

Airflow 3 serialises an operator's links as ``{name: xcom_key}`` and the API server reads the URL
straight from that XCom, so a link is only as good as the value the task pushed. The operator pushes
every link as soon as its job is submitted (the TensorBoard URL once the board answers), before it
defers: the links work while the task waits in the triggerer, not only after it. When the task ends,
Airflow calls ``get_link`` and pushes the result again under the same key; the links here answer from
the operator's own state (or, for TensorBoard, an XCom the task is known to have pushed), so that call
neither overwrites a good URL with nothing nor asks for an XCom that does not exist (a 404 error in the
task log), and never fails the task.

The replica's log URL: the connection extra ``logs_url_template`` (a ``str.format`` template with the
fields ``namespace``, ``pod``, ``job``, ``replica`` and ``container``), else the Kubernetes dashboard's
log view when the extra ``dashboard_url`` is set; neither set: no URL (the UI shows the link disabled).
Once the task deleted its board, ``get_link`` answers an empty value, so the UI stops offering it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink
from airflow.sdk.execution_time.xcom import XCom

from airflow_tfjob.follow.logs_parsing import replica_name
from airflow_tfjob.integrations.tensorboard import XCOM_KEY
from airflow_tfjob.version_compat import AIRFLOW_V_3_1_PLUS, AirflowNotFoundException

if AIRFLOW_V_3_1_PLUS:
    from airflow.sdk import BaseHook
else:  # 3.0 keeps it in the core
    from airflow.hooks.base import BaseHook  # type: ignore[no-redef,attr-defined]

if TYPE_CHECKING:
    from airflow.sdk.types import TaskInstanceKey

    from airflow_tfjob.jobs.kinds import JobKind

log = logging.getLogger(__name__)

REPLICA_LOGS_PREFIX = "Logs "
REPLICA_LOGS_XCOM_PREFIX = "replica_logs_url_"
TEMPLATE_FIELD = "logs_url_template"
DASHBOARD_FIELD = "dashboard_url"
TEMPLATE_FIELDS = ("namespace", "pod", "job", "replica", "container")
DASHBOARD_LOG = "{dashboard}/#/log/{namespace}/{pod}/pod?namespace={namespace}&container={container}"


class TensorBoardLink(BaseOperatorLink):
    """The job's TensorBoard, when the task was asked to start one."""

    name = "TensorBoard"

    @property
    def xcom_key(self) -> str:
        return XCOM_KEY

    def get_link(self, operator: Any, *, ti_key: TaskInstanceKey) -> str:
        # Airflow calls this when every task of the operator ends and pushes what it returns to the
        # link's XCom, which the UI reads. Without a board there is no XCom to read (asking would log
        # a 404 error in the task log); a board the task deleted gets no link (Airflow shows none).
        if not getattr(operator, "tensorboard", None) or getattr(operator, "_tensorboard_removed", False):
            return ""

        value = XCom.get_value(ti_key=ti_key, key=XCOM_KEY)
        return str(value) if value else ""


class ReplicaLogsLink(BaseOperatorLink):
    """One replica's log (``replica`` as the task log prefixes it: ``worker-0``)."""

    def __init__(self, replica: str = "") -> None:
        self.replica = replica

    @property
    def name(self) -> str:  # type: ignore[override]
        return REPLICA_LOGS_PREFIX + self.replica

    @property
    def xcom_key(self) -> str:
        return REPLICA_LOGS_XCOM_PREFIX + self.replica

    def get_link(self, operator: Any, *, ti_key: TaskInstanceKey) -> str:
        # The same URL the task pushed at submission, rebuilt from the job it followed: a try that
        # resumed from the triggerer knows the job from the trigger's event.
        ref = getattr(operator, "_job_ref", None)
        if ref is None:
            return ""
        try:
            template = logs_url_template(operator.kubernetes_conn_id)
            return replica_log_url(template, ref[0], ref[1], self.replica, operator.job_kind.container)
        except Exception as error:  # a link must never fail the task
            log.warning("No log link for replica %s: %s", self.replica, error)
            return ""


def operator_links(kind: JobKind, operator: Any) -> tuple[BaseOperatorLink, ...]:
    """The task's links: TensorBoard, and a log link per replica counted when the DAG is parsed, from
    ``replicas=`` and the shortcuts (``worker=2``). Templated counts add none: the UI's links are fixed
    at parse time. Nothing is checked here (conflicts are refused when the manifest is built)."""
    given = getattr(operator, "replicas", None)
    counts: dict[str, Any] = {}
    for key, count in (given.items() if isinstance(given, Mapping) else ()):
        counts[kind.canonical_type(key) or key] = count
    for rtype in kind.replica_types:
        counts.setdefault(rtype, getattr(operator, rtype.lower(), None))
    names = [
        replica_name(rtype, index)
        for rtype in kind.replica_types
        if isinstance(counts.get(rtype), int) and not isinstance(counts[rtype], bool)
        for index in range(counts[rtype])
    ]
    return (TensorBoardLink(), *(ReplicaLogsLink(name) for name in names))


def logs_url_template(conn_id: str) -> str | None:
    """The connection's template for a replica's log URL, or the dashboard's log view; None: neither
    (or no such connection: the operator may take its cluster from ``config_file`` alone)."""
    try:
        extra = BaseHook.get_connection(conn_id).extra_dejson
    except AirflowNotFoundException:
        return None
    template = extra.get(TEMPLATE_FIELD) or extra.get(f"extra__kubernetes__{TEMPLATE_FIELD}")
    if template:
        return str(template)
    dashboard = extra.get(DASHBOARD_FIELD) or extra.get(f"extra__kubernetes__{DASHBOARD_FIELD}")
    return DASHBOARD_LOG.replace("{dashboard}", str(dashboard).rstrip("/")) if dashboard else None


def replica_log_url(template: str | None, job: str, namespace: str, replica: str, container: str) -> str:
    if not template:
        return ""
    return template.format(namespace=namespace, pod=f"{job}-{replica}", job=job, replica=replica,
                           container=container)


def check_template(template: str) -> None:
    """A template naming a field it will not get fails when the connection is read, naming the fields."""
    try:
        template.format(**dict.fromkeys(TEMPLATE_FIELDS, "x"))
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(
            f"connection extra {TEMPLATE_FIELD}: {template!r} cannot be formatted ({error!r}); "
            f"use only the fields {', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)}"
        ) from error


def push_links(
    kind: JobKind,
    job: Mapping[str, Any],
    conn_id: str,
    push: Callable[[str, str], None],
    logger: Any,
    *,
    tensorboard: bool = False,
) -> None:
    """Push every replica's log URL of the submitted ``job``, so the links work while the task defers.

    With a board, an empty TensorBoard link first: the board's URL replaces it once the board answers,
    and a board that never does leaves an XCom that the end-of-task link lookup finds (no 404 logged).
    A connection that cannot be read or a bad template costs the links, never the task.
    """
    if tensorboard:
        push(XCOM_KEY, "")
    try:
        template = logs_url_template(conn_id)
        if template:
            check_template(template)
    except Exception as error:
        logger.warning("Replica log links are not available: %s", error)
        return
    if not template:
        return
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    for rtype, spec in (job.get("spec", {}).get(kind.spec_key) or {}).items():
        for index in range(int((spec or {}).get("replicas", 1))):
            replica = replica_name(rtype, index)
            push(REPLICA_LOGS_XCOM_PREFIX + replica, replica_log_url(template, name, namespace, replica, kind.container))
