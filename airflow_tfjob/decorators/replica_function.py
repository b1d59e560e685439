"""A Python function as the program of every replica of a job: what ``@task.tfjob`` and
``@task.pytorchjob`` share (each decorator's module adds its kind's rank-0 rule and operator).

How the function reaches the pods, with nothing but the image's Python: its source (decorators
removed, as ``@task.kubernetes`` does) and its arguments (JSON) travel base64-encoded in environment
variables, and the container command is ``python -c <bootstrap>``; the bootstrap rebuilds the
function, calls it, and on the rank-0 replica prints the return value as one marker line. The follow
core picks that line out of the master replica's log and the task returns it as its XCom: no exec into
a pod, no shared volume, so it works the same on any cluster and in deferred mode (see "Return values
from replicas" in docs/architecture.md).

The function must be self-contained (imports inside it), and its arguments and return value must be
JSON-serialisable.
"""

from __future__ import annotations

import base64
import binascii
import inspect
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.bases.decorator import DecoratedOperator

from airflow_tfjob.build.checker import JobValidationError, Problem
from airflow_tfjob.build.paramtypes import json_value
from airflow_tfjob.build.secrets import mask_values
from airflow_tfjob.operators.generic import KubeflowJobOperator
from airflow_tfjob.version_compat import AirflowException

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_tfjob.follow.outcome import FollowOutcome

RETURN_MARKER = "__TFJOB_RETURN__"
SOURCE_ENV = "TFJOB_FUNCTION_SOURCE"
CALL_ENV = "TFJOB_FUNCTION_CALL"
DEFAULT_IMAGE = "tensorflow/tensorflow:2.21.0"
_REPLICA_ARGS = ("chief", "master", "ps", "worker", "evaluator")


def bootstrap(decorator: str, rank0: str) -> str:
    """The program every replica runs: rebuild the function, call it, and on rank 0 (the lines
    `rank0`, which set ``rank0``) print the value as the marker line.

    Kept free of anything but the standard library, and of double quotes and backslashes'
    surprises: it is passed as one argv element, never through a shell.
    """
    return f"""
import base64, json, os, sys
source = base64.b64decode(os.environ[{SOURCE_ENV!r}]).decode("utf-8")
call = json.loads(base64.b64decode(os.environ[{CALL_ENV!r}]).decode("utf-8"))
namespace = {{"__name__": "__tfjob_function__"}}
exec(compile(source, "<{decorator} " + call["name"] + ">", "exec"), namespace)
value = namespace[call["name"]](*call["args"], **call["kwargs"])
{rank0.strip()}
if rank0:
    payload = base64.b64encode(json.dumps(value).encode("utf-8")).decode("ascii")
    sys.stdout.write("\\n{RETURN_MARKER} " + payload + "\\n")
    sys.stdout.flush()
"""


def encode_call(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    """The call as base64 JSON; an error naming the argument that cannot cross into a pod."""
    problems = [
        Problem(f"{where}{found[0]}", found[1], "pass JSON values (strings, numbers, booleans, lists, dicts)")
        for where, value in [*((f"op_args[{i}]", v) for i, v in enumerate(args)),
                             *((f"op_kwargs.{k}", v) for k, v in kwargs.items())]
        if (found := json_value(value))
    ]  # fmt: skip
    if problems:
        raise JobValidationError(problems)
    text = json.dumps({"name": name, "args": list(args), "kwargs": kwargs})
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def secret_arguments(
    func: Callable[..., Any], secret_args: Sequence[str], args: Sequence[Any], kwargs: dict[str, Any]
) -> list[Any]:
    """The values of the call's arguments named in ``secret_args`` (names of the function's parameters)."""
    signature = inspect.signature(func)
    unknown = [n for n in secret_args if n not in signature.parameters]
    if unknown:
        raise JobValidationError(
            "secret_args",
            f"{unknown} are not parameters of {func.__name__} (it has {list(signature.parameters)})",
            "name the function's parameters whose values are secret",
        )
    try:
        bound = signature.bind_partial(*args, **kwargs)
    except TypeError as error:
        raise JobValidationError(
            "op_args",
            f"do not fit {func.__name__}{signature} ({error})",
            "call the function with its parameters",
        ) from None
    return [bound.arguments[n] for n in secret_args if n in bound.arguments]


def decode_return(payload: str) -> Any:
    """The master replica's return value from the text that followed the marker."""
    try:
        return json.loads(base64.b64decode(payload.strip(), validate=True).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError) as error:
        raise AirflowException(
            f"@task.tfjob: unreadable return value from the master replica ({error})"
        ) from error


def _with_env(env: dict[str, Any] | list[dict[str, Any]] | None, extra: dict[str, str]) -> Any:
    """The user's env (dict or EnvVar list form) plus ours; ours win, the user's order is kept."""
    if env is None or isinstance(env, dict):
        return {**(env or {}), **extra}
    kept = [item for item in env if item.get("name") not in extra]
    return [*kept, *({"name": key, "value": value} for key, value in extra.items())]


class ReplicaFunctionOperator(DecoratedOperator):
    """The decorated function as every replica's program; mixed with a job operator (TFJobOperator,
    PyTorchJobOperator...), whose class attributes below say what differs between decorators."""

    return_marker: str | None = RETURN_MARKER
    custom_operator_name: str
    shallow_copy_attrs: Sequence[str] = ("python_callable",)
    #: The program the replicas run: bootstrap(...) with the kind's rank-0 rule (each decorator's own).
    replica_program: str
    #: The operator parameters that give replica counts; without a manifest and all None: one worker.
    replica_args: tuple[str, ...] = _REPLICA_ARGS
    job_field: str
    secret_env: Any
    env: Any
    command: Any

    def __init__(self, *, image: str | None = None, secret_args: Sequence[str] = (), **kwargs: Any) -> None:
        if isinstance(secret_args, str) or not all(isinstance(n, str) for n in secret_args):
            raise JobValidationError(
                "secret_args",
                f"{secret_args!r} is not a list of parameter names",
                "pass e.g. secret_args=['token']",
            )
        self.secret_args = tuple(secret_args)
        if kwargs.get(self.job_field) is None:
            # Without a manifest the decorator must still describe a complete job.
            if kwargs.get("images") is None and image is None:
                image = DEFAULT_IMAGE
            if all(kwargs.get(kind) is None for kind in self.replica_args):
                kwargs["worker"] = 1
        if kwargs.pop("command", None) is not None:
            raise ValueError(
                f"{self.custom_operator_name}: `command` is the decorated function; do not pass one"
            )
        super().__init__(image=image, command=["python", "-c", self.replica_program], **kwargs)

    def _mask_secrets(self) -> None:
        # Also when the task renders: the rendered op_args/op_kwargs are stored and shown in the UI.
        super()._mask_secrets()  # type: ignore[misc]
        if self.secret_args:
            mask_values(
                secret_arguments(
                    self.python_callable, self.secret_args, list(self.op_args), dict(self.op_kwargs)
                )
            )

    def _secret_strings(self) -> list[Any]:
        # A secret argument's value repeated in another argument is hidden in the rendered fields too.
        own = super()._secret_strings()  # type: ignore[misc]
        if not self.secret_args:
            return list(own)
        return [
            *own,
            *secret_arguments(
                self.python_callable, self.secret_args, list(self.op_args), dict(self.op_kwargs)
            ),
        ]

    def execute(self, context: Context) -> Any:
        self._unhide_rendered_secrets()  # type: ignore[attr-defined]
        name = self.python_callable.__name__
        source = self.get_python_source()
        call = encode_call(name, list(self.op_args), dict(self.op_kwargs))
        ours = {SOURCE_ENV: base64.b64encode(source.encode("utf-8")).decode("ascii"), CALL_ENV: call}
        if self.secret_args:
            self._mask_secrets()
            # The encoded call holds them: it travels as a secret env value, hidden like secret_env.
            self.secret_env = {**(self.secret_env or {}), CALL_ENV: ours.pop(CALL_ENV)}
        self.env = _with_env(self.env, ours)
        self.command = ["python", "-c", self.replica_program]
        # Skip DecoratedOperator.execute (it would call the function here); run the job instead.
        return KubeflowJobOperator.execute(self, context)  # type: ignore[arg-type]

    def result_from_outcome(self, outcome: FollowOutcome, context: Context) -> Any:
        payload = outcome.part("return_payload")
        if payload is None:
            raise AirflowException(
                f"{self.custom_operator_name} {self.python_callable.__name__}: the job succeeded but its "
                f"master replica printed no {RETURN_MARKER} line (did the function return, or did the "
                "replica exit first?)"
            )
        return decode_return(payload)


def decorated_template_fields(operator: type[KubeflowJobOperator]) -> tuple[str, ...]:
    """`command` is the decorator's: the bootstrap. Everything else of the operator stays templated."""
    return tuple({"op_args", "op_kwargs", *operator.template_fields} - {"command"})
