"""Checks of the operators' own parameters (how to follow, clean up, log), before any API call.

The manifest has its validator (:mod:`airflow_tfjob.build.validation`); these are the operator's other
knobs. A mistake there would otherwise surface late and obscurely: a misspelt ``log_replicas`` as a
crash of the log follower after the job was created, an unknown ``on_finish_action`` as a cleanup
that never happens. Every problem names the parameter and the fix, and all of them are reported at
once, in the same :class:`~airflow_tfjob.build.validation.JobValidationError` as manifest problems.

The rules here know no parameter by name: each row of the parameter table (operators/params.py)
names its rule, and the rule is told the name it reports under.

Pure and cheap to import: the operator calls it at DAG parse time (for values that are not
templates) and again at the start of ``execute`` (after rendering). The parsers the rules call are
imported at the top: light modules, which making an operator loaded anyway when they were imported
inside the rules; the sensors share only :mod:`airflow_tfjob.operators.shared_checks`, which imports
none of them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, NoReturn

from airflow.sdk import Asset

from airflow_tfjob.build.checker import PRINTABLE_ENV_RE, JobValidationError, Problem
from airflow_tfjob.build.checkpoints import parse_store
from airflow_tfjob.build.naming import canonical_replica_type
from airflow_tfjob.build.paramtypes import type_problems
from airflow_tfjob.follow.logs_parsing import LogSelection
from airflow_tfjob.follow.progress_spec import check_progress
from airflow_tfjob.integrations.tensorboard import TensorBoardSpec
from airflow_tfjob.jobs.status import job_kind
from airflow_tfjob.operators.api_choice import APIS
from airflow_tfjob.operators.shared_checks import is_template

# Katib's metric name syntax (metrics.METRIC_RE's name group): a name outside it is never matched.
_METRIC_NAME = re.compile(r"[\w|-]+")
_RESERVED_METRICS = ("history", "missing")  # follow.metric_names.RESERVED_KEYS: keys of the metrics result


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_finite(value: Any) -> bool:
    """A number that can be a duration or a bound (NaN compares false to everything, infinity never ends)."""
    return _is_number(value) and math.isfinite(value)


#: A parameter's check, named by its row in operators/params.py: ``rule(name, value, given)`` returns
#: the value as the code using it takes it (``log_replicas`` parsed into a LogSelection) or raises
#: JobValidationError naming ``name``; ``given`` holds the operator's other checked parameters (the
#: TensorBoard ones are read together). A value still to be rendered is returned as it is.
Rule = Callable[[str, Any, Mapping[str, Any]], Any]


def _refuse(name: str, problem: str, fix: str) -> NoReturn:
    raise JobValidationError(name, problem, fix)


def choice(*choices: str, what: str = "a known action") -> Rule:
    def rule(name: str, value: Any, given: Mapping[str, Any]) -> Any:
        if value not in choices:
            _refuse(name, f"{value!r} is not {what}", f"use one of {', '.join(map(repr, choices))}")
        return value

    return rule


def retry_policy(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    """A retry policy: an object with Airflow's ``evaluate`` (a class passed instead of an instance
    is the usual slip)."""
    if value is None or (not isinstance(value, type) and callable(getattr(value, "evaluate", None))):
        return value
    if isinstance(value, type):
        _refuse(name, f"{value.__name__} is a class, not a policy", f"pass an instance: {value.__name__}()")
    _refuse(name, f"{value!r} is not a retry policy", "pass one such as TrainingRetryPolicy(), or leave it out")


def api_choice(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    return choice(*APIS, what="an API a TFJob runs on")(name, value, given)


def seconds(*, none_ok: bool) -> Rule:
    def rule(name: str, value: Any, given: Mapping[str, Any]) -> Any:
        if value is None and none_ok:
            return value
        if not _is_finite(value) or value <= 0:
            fix = "a finite positive number of seconds" + (", or None for no limit" if none_ok else "")
            _refuse(name, f"{value!r} is not a finite positive number of seconds", f"use {fix}")
        return value

    return rule


#: The longest window a Kubernetes TTL holds (ttlSecondsAfterFinished is an int32).
MAX_WINDOW_SECONDS = 2**31 - 1


def window(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    """A time window (seconds, or a ``datetime.timedelta``) as whole seconds, rounded up: a TTL counts
    whole seconds, and rounding down would shorten what the user asked to keep."""
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if not _is_finite(seconds) or not 0 < seconds <= MAX_WINDOW_SECONDS:
        _refuse(
            name,
            f"{value!r} is not a positive duration of at most {MAX_WINDOW_SECONDS} seconds",
            "use seconds (e.g. 3600) or a datetime.timedelta (e.g. timedelta(hours=1)); None keeps "
            "today's cleanup",
        )
    return math.ceil(seconds)


def retry_seconds(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    if value is not None and (not _is_finite(value) or value < 0):
        _refuse(
            name,
            f"{value!r} is not a number of seconds",
            "use the seconds every API call may be retried in all (0: no retries), or None for the "
            "default of 240",
        )
    return value


def count(unit: str) -> Rule:
    def rule(name: str, value: Any, given: Mapping[str, Any]) -> Any:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            _refuse(
                name, f"{value!r} is not a non-negative integer", f"use a number of {unit}; 0 means no limit"
            )
        return value

    return rule


def boolean(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    if not isinstance(value, bool):
        _refuse(name, f"{value!r} is not a boolean", "use True or False")
    return value


def connection_id(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    if not isinstance(value, str) or not value:
        _refuse(name, f"{value!r} is not a connection id", "use e.g. 'kubernetes_default'")
    return value


def worker_connections(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    """``multikueue_connections``: a map from MultiKueue worker cluster name to Airflow connection id.

    Refused here, before any request, rather than when the job lands on a worker minutes later: a
    wrong map would otherwise surface as a follow without replica lines, far from its cause.
    """
    if value is None:
        return value
    example = "use e.g. {'worker1': 'k8s_worker1'}: each MultiKueueCluster's name to a kubernetes connection id"
    if not isinstance(value, Mapping):
        _refuse(name, f"is a {type(value).__name__}, not a map of worker cluster to connection id", example)
    problems = [
        Problem(f"{name}[{key!r}]", "is not a worker cluster name (a non-empty string)", example)
        for key in value
        if not isinstance(key, str) or not key.strip()
    ]
    problems += [
        Problem(f"{name}[{key!r}]", f"{conn!r} is not a connection id (a non-empty string)", example)
        for key, conn in value.items()
        if isinstance(key, str) and key.strip() and (not isinstance(conn, str) or not conn.strip())
    ]
    if problems:
        raise JobValidationError(problems)
    return dict(value)


def grace_period(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    _refuse(
        name,
        f"{value!r} is not a non-negative whole number of seconds",
        "use e.g. 1 (SIGTERM, then SIGKILL a second later), 0 to remove the pods at once, or None "
        "for the pods' own terminationGracePeriodSeconds",
    )


def log_selection(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    """The one parse of ``log_replicas`` on the operator's side: the LogSelection it carries on."""
    if is_template(value):
        return value
    if not isinstance(value, str):
        _refuse(name, f"{value!r} is not a string", "use e.g. 'master', 'all' or 'chief,worker:0'")
    try:
        return LogSelection.parse(value)
    except ValueError as error:
        _refuse(
            name,
            str(error).removeprefix(f"{name}: "),
            "use 'all', 'master', a replica type (chief, master, ps, worker, evaluator), "
            "'<type>:<index>' such as 'worker:0', or a comma-separated list of these",
        )


def metric_names(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    if not isinstance(value, (list, tuple)):
        _refuse(name, f"{value!r} is not a list", "use a list of names, e.g. ['loss']")
    problems: list[Problem] = []
    seen: set[str] = set()
    for item in value:
        if not isinstance(item, str) or not _METRIC_NAME.fullmatch(item):
            problems.append(
                Problem(
                    name,
                    f"{item!r} is not a metric name the collector can match (Katib StdOut format name=value)",
                    "use letters, digits, '_', '-' or '|' only, as printed before '=' (e.g. 'loss', 'val-acc')",
                )
            )
        elif item in _RESERVED_METRICS:
            problems.append(
                Problem(name, f"{item!r} is a reserved key of the metrics result", "rename the metric")
            )
        elif item in seen:
            problems.append(Problem(name, f"{item!r} is listed twice", "list each metric once"))
        seen.add(str(item))
    if problems:
        raise JobValidationError(problems)
    return list(value)


def progress_shape(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    check_progress(value)
    return value


def lineage(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    problems = lineage_problems(name, value)
    if problems:
        raise JobValidationError(problems)
    return value


def checkpoint_store(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    """``checkpoint``: the store it names (a CheckpointStore), or None; a template waits for its value."""
    if is_template(value) or (isinstance(value, Mapping) and any(is_template(v) for v in value.values())):
        return value
    return parse_store(value, name)


_LINEAGE_FIX = "use an airflow.sdk.Asset or a URI such as 's3://models/digits' or '/mnt/models/digits'"


def lineage_problems(name: str, value: Any) -> list[Problem]:
    """The problems of one lineage parameter (``model_asset``: one asset; the others: a list of them)."""
    # Airflow's SDK, imported by the check alone: a DAG file's parse has it loaded already.

    def bad(item: Any) -> str | None:
        """Why ``item`` is no asset (Airflow's own refusal names no parameter), or None."""
        if isinstance(item, Asset):
            return None
        if not isinstance(item, str) or not item.strip():
            return "is not an asset"
        if is_template(item):
            return None  # checked once rendered
        if any(c.isspace() for c in item):
            return "contains whitespace, which no asset URI has"
        scheme, _, rest = item.partition("://")
        if "://" in item and (not scheme or not rest.strip("/")):
            return "names no location after its scheme"
        try:
            as_asset(item)
        except (ValueError, TypeError) as error:
            return f"is refused by Airflow: {error}"
        return None

    if value is None:
        return []
    if name == "model_asset":
        why = bad(value)
        return [Problem(name, f"{value!r:.200} {why}", _LINEAGE_FIX)] if why else []
    if is_template(value):
        return []
    if not isinstance(value, (list, tuple)):
        return [Problem(name, f"{value!r:.200} is not a list", f"use a list of them: {_LINEAGE_FIX}")]
    return [
        Problem(name, f"item {i} ({item!r:.200}) {why}", _LINEAGE_FIX)
        for i, item in enumerate(value)
        if (why := bad(item))
    ]


def as_asset(value: Asset | str) -> Asset:
    """``value`` as an Asset (a URI names its own asset)."""
    return value if isinstance(value, Asset) else Asset(uri=value, name=value)



# Kueue's webhook takes a LocalQueue name only as a DNS-1123 label (kueue.x-k8s.io/queue-name).
_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_QUEUE_FIX = (
    "name the LocalQueue as Kueue does: at most 63 lowercase letters, digits and '-', starting and "
    "ending with a letter or digit (kubectl get localqueues -n <namespace>)"
)


def _queue_name_problem(field: str, value: Any) -> Problem | None:
    if is_template(value) or not isinstance(value, str):
        return None  # a template is checked once rendered; another type is paramtypes'
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        return Problem(field, f"{value[:80]!r} is not a name Kueue's webhook accepts for a queue", _QUEUE_FIX)
    return None


def _queue_label(labels: Any) -> Any:
    return labels.get(_QUEUE_LABEL) if isinstance(labels, Mapping) else None


def queue_name(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    """``kueue_queue``: a LocalQueue name Kueue takes, and not contradicted by the queue-name label."""
    if value is None:
        return value
    problem = _queue_name_problem(name, value)
    if problem is not None:
        raise JobValidationError([problem])
    label = _queue_label(given.get("labels"))
    if isinstance(label, str) and not is_template(label) and not is_template(value) and label != value:
        _refuse(
            name,
            f"{value!r} disagrees with labels[{_QUEUE_LABEL!r}]={label[:80]!r}; one would silently win",
            f"give the queue once: kueue_queue={value!r}, without the {_QUEUE_LABEL} label",
        )
    return value


def queue_label(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    """``labels``: the queue-name label, when set there, is a queue name Kueue takes (the rest is the
    manifest validator's)."""
    problem = _queue_name_problem(f"{name}[{_QUEUE_LABEL!r}]", _queue_label(value))
    if problem is not None:
        raise JobValidationError([problem])
    return value


def env_names(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    """``secret_env`` (and its like): every variable name valid, each named without its value."""
    if not isinstance(value, Mapping):
        return value  # paramtypes names the type, never the value of a secret
    problems = [
        Problem(
            f"{name}[{key!r}]",
            "is not a valid environment variable name",
            "use letters, digits, '_', '-' and '.', starting with a letter or '_' (no spaces or '=')",
        )
        for key in value
        if isinstance(key, str) and not is_template(key) and not (key and PRINTABLE_ENV_RE.match(key))
    ]
    if problems:
        raise JobValidationError(problems)
    return value


def checked_with(other: str) -> Rule:
    """A parameter whose check is another's (``tensorboard_log_dir`` is ``tensorboard``'s)."""

    def rule(name: str, value: Any, given: Mapping[str, Any]) -> Any:
        return value

    rule.__doc__ = f"checked by {other}'s rule"
    return rule


def tensorboard_spec(value: Any, log_dir: Any = None, keep: Any = False) -> TensorBoardSpec | None:
    """The TensorBoardSpec the operator's three TensorBoard parameters describe (None: no board).

    ``value``: True (then ``log_dir`` is required), a log directory, a dict of TensorBoardSpec
    fields, or a TensorBoardSpec; ``log_dir`` and ``keep`` override the spec's own. ValueError if
    they do not describe one.
    """
    if value is None or value is False:
        if log_dir is not None:
            raise ValueError("tensorboard_log_dir is set but tensorboard is not enabled")
        return None
    if value is True:
        fields: dict[str, Any] = {}
    elif isinstance(value, TensorBoardSpec):
        fields = value.to_dict()
    elif isinstance(value, str):
        fields = {"log_dir": value}
    elif isinstance(value, Mapping):
        fields = dict(value)
    else:
        raise ValueError(f"{value!r} is not a boolean, a log directory, a dict or a TensorBoardSpec")
    if log_dir is not None:
        fields["log_dir"] = log_dir
    if not fields.get("log_dir"):
        raise ValueError("a log directory is required")
    if keep:
        fields["keep"] = True
    try:
        return TensorBoardSpec(**fields)
    except TypeError as error:  # an unknown field in the dict
        raise ValueError(str(error)) from error


def tensorboard(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    """``tensorboard`` with ``tensorboard_log_dir`` and ``tensorboard_keep`` (their rows' own checks)."""
    log_dir, keep = given.get("tensorboard_log_dir"), given.get("tensorboard_keep", False)
    if is_template(log_dir) or (isinstance(value, Mapping) and any(is_template(v) for v in value.values())):
        return value
    try:
        tensorboard_spec(value, log_dir, keep)
    except ValueError as error:
        _refuse(
            name,
            str(error),
            "use tensorboard=True with tensorboard_log_dir='<where the training writes summaries>', "
            "or tensorboard={'log_dir': ..., 'service_type': ..., 'url_template': ...} "
            "(the fields of airflow_tfjob.integrations.tensorboard.TensorBoardSpec)",
        )
    return value


def check_operator_parameters(
    params: Mapping[str, Any], rules: Mapping[str, Rule], kind: str = "TFJob"
) -> dict[str, Any]:
    """Raise JobValidationError listing every problem among the operator's own parameters; return
    them as the code using them takes them.

    ``params`` holds the operator's attributes by parameter name; absent keys are not checked.
    ``rules``: each parameter's rule, in the order problems are listed (an operator's table's
    ``rules``, or every row's: ``operators.trainjob_params.every_rule()``; the tables name this
    module's rules, so this module names no table). ``kind``: the job's, which the message names.
    """
    problems: list[Problem] = []
    checked: dict[str, Any] = {}
    for name, rule in rules.items():
        if name not in params:
            continue
        try:
            checked[name] = rule(name, params[name], params)
        except JobValidationError as error:
            problems.extend(error.problems)
    if problems:
        raise JobValidationError(problems, kind=kind)
    return checked


def check_log_replicas_against_job(selection: Any, manifest: Mapping[str, Any]) -> None:
    """Refuse a ``log_replicas`` selection (as its rule parsed it) naming a replica type or index the
    job does not have. Such a selection would show nothing, and the task log would stay silent for
    the whole run.
    """
    if not isinstance(selection, LogSelection):
        return
    kind = job_kind(manifest)
    specs = (manifest.get("spec") or {}).get(kind.spec_key) or {}
    counts: dict[str, int] = {}
    for key, replica in specs.items():
        count = replica.get("replicas", 1) if isinstance(replica, Mapping) else 1
        counts[(kind.canonical_type(str(key)) or key).lower()] = count if isinstance(count, int) else 1
    problems = []
    shape = ", ".join(f"{t}: {n}" for t, n in counts.items())
    for rtype in sorted(selection.types):
        if rtype not in counts:
            problems.append(f"{rtype!r} is not a replica type of this job")
    for rtype, index in sorted(selection.replicas):
        if index >= counts.get(rtype, 0):
            problems.append(f"'{rtype}:{index}' is not a replica of this job")
    if problems:
        raise JobValidationError(
            [
                Problem(
                    "log_replicas",
                    f"{p} (it has {shape})",
                    "name replicas the job has, or use 'master' or 'all'",
                )
                for p in problems
            ]
        )


def replica_counts(replicas: Any, shortcuts: Mapping[str, Any]) -> Any:
    """``replicas`` with the shortcut arguments (``worker=2``) added; a type given in both is refused."""
    if not shortcuts:
        return replicas
    if replicas is None:
        return dict(shortcuts)
    if not isinstance(replicas, Mapping):
        return replicas  # the type check names it
    given = {canonical_replica_type(k) or k: k for k in replicas}
    problems = [
        Problem(
            f"replicas.{given[canonical_replica_type(key)]}",
            f"is also given as {key}={shortcuts[key]!r}; one would silently override the other",
            f"give the {key} count once: in replicas= or as {key}=",
        )
        for key in shortcuts
        if canonical_replica_type(key) in given
    ]
    if problems:
        raise JobValidationError(problems)
    return {**replicas, **shortcuts}


def check_parameter_types(values: Mapping[str, Any], *, at_parse: bool = False, kind: str = "TFJob") -> None:
    """Raise JobValidationError for every parameter of the wrong type (airflow_tfjob.build.paramtypes).

    ``at_parse``: when the operator is created, values still to be rendered (Jinja strings, XCom
    references) are left for the check after rendering.
    """
    if at_parse:
        values = {k: v for k, v in values.items() if not is_template(v) and not hasattr(v, "resolve")}
    problems = type_problems(values)
    if problems:
        raise JobValidationError(problems, kind=kind)
