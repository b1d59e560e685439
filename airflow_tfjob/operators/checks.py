"""Checks of TFJobOperator's own parameters (how to follow, clean up, log), before any API call.

The manifest has its validator (:mod:`airflow_tfjob.validation`); these are the operator's other
knobs. A mistake there would otherwise surface late and obscurely: a misspelt ``log_replicas`` as a
crash of the log follower after the job was created, an unknown ``on_finish_action`` as a cleanup
that never happens. Every problem names the parameter and the fix, and all of them are reported at
once, in the same :class:`~airflow_tfjob.validation.TFJobValidationError` as manifest problems.

Pure and cheap to import: the operator calls it at DAG parse time (for values that are not
templates) and again at the start of ``execute`` (after rendering).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_tfjob.cleanup import ON_FINISH_ACTIONS, ON_KILL_ACTIONS
from airflow_tfjob.validation import Problem, TFJobValidationError

if TYPE_CHECKING:
    from airflow_tfjob.tensorboard import TensorBoardSpec

# Katib's metric name syntax (metrics.METRIC_RE's name group): a name outside it is never matched.
_METRIC_NAME = re.compile(r"[\w|-]+")
_RESERVED_METRICS = ("history", "missing")  # metrics.RESERVED_KEYS: keys of the metrics result


def is_template(value: Any) -> bool:
    """A Jinja expression not rendered yet (checked again once rendered)."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_choice(problems: list[Problem], name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        problems.append(
            Problem(name, f"{value!r} is not a known action", f"use one of {', '.join(map(repr, choices))}")
        )


def _check_seconds(problems: list[Problem], name: str, value: Any, *, none_ok: bool) -> None:
    if value is None and none_ok:
        return
    if not _is_number(value) or value <= 0:
        fix = "a positive number of seconds" + (", or None for no limit" if none_ok else "")
        problems.append(Problem(name, f"{value!r} is not a positive number of seconds", f"use {fix}"))


def _check_count(problems: list[Problem], name: str, value: Any, unit: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        problems.append(
            Problem(
                name, f"{value!r} is not a non-negative integer", f"use a number of {unit}; 0 means no limit"
            )
        )


def _check_grace_period(problems: list[Problem], value: Any) -> None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return
    problems.append(
        Problem(
            "kill_grace_period",
            f"{value!r} is not a non-negative whole number of seconds",
            "use e.g. 1 (SIGTERM, then SIGKILL a second later), 0 to remove the pods at once, or None "
            "for the pods' own terminationGracePeriodSeconds",
        )
    )


def _check_log_replicas(problems: list[Problem], value: Any) -> None:
    if is_template(value):
        return
    from airflow_tfjob.logs import LogSelection  # the one parser the follower uses

    if not isinstance(value, str):
        problems.append(
            Problem(
                "log_replicas", f"{value!r} is not a string", "use e.g. 'master', 'all' or 'chief,worker:0'"
            )
        )
        return
    try:
        LogSelection.parse(value)
    except ValueError as error:
        problems.append(
            Problem(
                "log_replicas",
                str(error).removeprefix("log_replicas: "),
                "use 'all', 'master', a replica type (chief, master, ps, worker, evaluator), "
                "'<type>:<index>' such as 'worker:0', or a comma-separated list of these",
            )
        )


def _check_metrics(problems: list[Problem], value: Any) -> None:
    if not isinstance(value, (list, tuple)):
        problems.append(Problem("metrics", f"{value!r} is not a list", "use a list of names, e.g. ['loss']"))
        return
    seen: set[str] = set()
    for item in value:
        if not isinstance(item, str) or not _METRIC_NAME.fullmatch(item):
            problems.append(
                Problem(
                    "metrics",
                    f"{item!r} is not a metric name the collector can match (Katib StdOut format name=value)",
                    "use letters, digits, '_', '-' or '|' only, as printed before '=' (e.g. 'loss', 'val-acc')",
                )
            )
        elif item in _RESERVED_METRICS:
            problems.append(
                Problem("metrics", f"{item!r} is a reserved key of the metrics result", "rename the metric")
            )
        elif item in seen:
            problems.append(Problem("metrics", f"{item!r} is listed twice", "list each metric once"))
        seen.add(str(item))


def tensorboard_spec(value: Any, log_dir: Any = None, keep: Any = False) -> TensorBoardSpec | None:
    """The TensorBoardSpec the operator's three TensorBoard parameters describe (None: no board).

    ``value``: True (then ``log_dir`` is required), a log directory, a dict of TensorBoardSpec
    fields, or a TensorBoardSpec; ``log_dir`` and ``keep`` override the spec's own. ValueError if
    they do not describe one.
    """
    from airflow_tfjob.tensorboard import TensorBoardSpec

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


def _check_tensorboard(problems: list[Problem], value: Any, log_dir: Any, keep: Any) -> None:
    if not isinstance(keep, bool):
        problems.append(Problem("tensorboard_keep", f"{keep!r} is not a boolean", "use True or False"))
    if is_template(log_dir) or (isinstance(value, Mapping) and any(is_template(v) for v in value.values())):
        return
    try:
        tensorboard_spec(value, log_dir, keep)
    except ValueError as error:
        problems.append(
            Problem(
                "tensorboard",
                str(error),
                "use tensorboard=True with tensorboard_log_dir='<where the training writes summaries>', "
                "or tensorboard={'log_dir': ..., 'service_type': ..., 'url_template': ...} "
                "(the fields of airflow_tfjob.tensorboard.TensorBoardSpec)",
            )
        )


#: What a preemption by Kueue does to the task: wait for the job to be admitted again, or fail it.
ON_PREEMPTION = ("wait", "fail")


def check_operator_parameters(params: Mapping[str, Any]) -> None:
    """Raise TFJobValidationError listing every problem among the operator's own parameters.

    ``params`` holds the operator's attributes by parameter name; absent keys are not checked.
    """
    problems: list[Problem] = []
    if "on_finish_action" in params:
        _check_choice(problems, "on_finish_action", params["on_finish_action"], ON_FINISH_ACTIONS)
    if "on_kill_action" in params:
        _check_choice(problems, "on_kill_action", params["on_kill_action"], ON_KILL_ACTIONS)
    if "kill_grace_period" in params:
        _check_grace_period(problems, params["kill_grace_period"])
    if "api" in params:
        from airflow_tfjob.trainjob.discovery import APIS

        if params["api"] not in APIS:
            problems.append(
                Problem(
                    "api",
                    f"{params['api']!r} is not an API a TFJob runs on",
                    f"use one of {', '.join(map(repr, APIS))}",
                )
            )
    if "startup_timeout" in params:
        _check_seconds(problems, "startup_timeout", params["startup_timeout"], none_ok=True)
    if "queue_timeout" in params:
        _check_seconds(problems, "queue_timeout", params["queue_timeout"], none_ok=True)
    if "kueue_workload_window" in params:
        _check_seconds(problems, "kueue_workload_window", params["kueue_workload_window"], none_ok=False)
    if "on_preemption" in params:
        _check_choice(problems, "on_preemption", params["on_preemption"], ON_PREEMPTION)
    if not isinstance(params.get("kueue_require_admission", False), bool):
        value = params["kueue_require_admission"]
        problems.append(Problem("kueue_require_admission", f"{value!r} is not a boolean", "use True or False"))
    if "api_retry_timeout" in params:
        value = params["api_retry_timeout"]
        if value is not None and (not _is_number(value) or value < 0):
            problems.append(
                Problem(
                    "api_retry_timeout",
                    f"{value!r} is not a number of seconds",
                    "use the seconds every API call may be retried in all (0: no retries), or None for the "
                    "default of 240",
                )
            )
    if "log_replicas" in params:
        _check_log_replicas(problems, params["log_replicas"])
    if "metrics" in params:
        _check_metrics(problems, params["metrics"])
    if "progress" in params:
        _check_progress(problems, params["progress"])
    if "log_rate_per_replica" in params:
        _check_count(problems, "log_rate_per_replica", params["log_rate_per_replica"], "lines per second")
    if "log_total_cap" in params:
        _check_count(problems, "log_total_cap", params["log_total_cap"], "lines")
    for flag in ("get_logs", "metrics_history", "deferrable", "render_only"):
        if flag in params and not isinstance(params[flag], bool):
            problems.append(Problem(flag, f"{params[flag]!r} is not a boolean", "use True or False"))
    if "kubernetes_conn_id" in params:
        conn_id = params["kubernetes_conn_id"]
        if not isinstance(conn_id, str) or not conn_id:
            problems.append(
                Problem(
                    "kubernetes_conn_id",
                    f"{conn_id!r} is not a connection id",
                    "use e.g. 'kubernetes_default'",
                )
            )
    for name in ("model_asset", "lineage_inputs", "lineage_outputs"):
        if name in params:
            # Imported here: the sensor reads this module and has no lineage parameters.
            from airflow_tfjob.operators.lineage import lineage_problems

            problems += lineage_problems(name, params[name])
    if "tensorboard" in params:
        _check_tensorboard(
            problems,
            params["tensorboard"],
            params.get("tensorboard_log_dir"),
            params.get("tensorboard_keep", False),
        )
    if problems:
        raise TFJobValidationError(problems)


def _check_progress(problems: list[Problem], value: Any) -> None:
    from airflow_tfjob.progress import check_progress

    try:
        check_progress(value)
    except TFJobValidationError as error:
        problems.extend(error.problems)


def check_log_replicas_against_job(value: Any, manifest: Mapping[str, Any]) -> None:
    """Refuse a ``log_replicas`` naming a replica type or index the job does not have.

    Such a selection would show nothing, and the task log would stay silent for the whole run.
    """
    from airflow_tfjob.logs import LogSelection
    from airflow_tfjob.status import job_kind

    if not isinstance(value, str):
        return
    selection = LogSelection.parse(value)
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
        raise TFJobValidationError(
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
    from airflow_tfjob.naming import canonical_replica_type

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
        raise TFJobValidationError(problems)
    return {**replicas, **shortcuts}


def check_parameter_types(values: Mapping[str, Any], *, at_parse: bool = False) -> None:
    """Raise TFJobValidationError for every parameter of the wrong type (airflow_tfjob.paramtypes).

    ``at_parse``: when the operator is created, values still to be rendered (Jinja strings, XCom
    references) are left for the check after rendering.
    """
    from airflow_tfjob.paramtypes import type_problems

    if at_parse:
        values = {k: v for k, v in values.items() if not is_template(v) and not hasattr(v, "resolve")}
    problems = type_problems(values)
    if problems:
        raise TFJobValidationError(problems)


def kind_name_of(kind: Any, default: str | None, owner: str) -> str:
    """The canonical name of an operator's or sensor's `kind` (its class's `default` when not given).

    Missing, unknown, or another kind than a named class's (``PyTorchJobOperator(kind="TFJob")``):
    TFJobValidationError naming `kind` and the fix.
    """
    from airflow_tfjob.kinds import KINDS, kind_named

    given = kind if kind is not None else default
    known = ", ".join(k.kind for k in KINDS)
    if not isinstance(given, str):
        raise TFJobValidationError(
            "kind", "is missing" if given is None else f"is {given!r}", f"pass one of {known}"
        )
    try:
        name = kind_named(given).kind
    except ValueError as error:
        raise TFJobValidationError("kind", str(error), f"pass one of {known}") from None
    if default is not None and name != default:
        raise TFJobValidationError(
            "kind",
            f"is {name!r} but {owner} is for {default}s",
            f"leave kind out, or use the class for {name}",
        )
    return name
