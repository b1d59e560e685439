"""The checks the sensors share with the operators: a value still to be rendered, and the ``kind``
parameter.

Apart from :mod:`airflow_tfjob.operators.checks` so that a DAG file importing a sensor loads these
alone: the operators' checks import, at their top, the parsers their parameters' rules call (the log
selection, the progress spec, the checkpoint stores, TensorBoard's spec, the type table), which no
sensor needs.
"""

from __future__ import annotations

from typing import Any

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.jobs.kinds import KINDS, kind_named


def is_template(value: Any) -> bool:
    """A Jinja expression not rendered yet (checked again once rendered)."""
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def kind_name_of(kind: Any, default: str | None, owner: str) -> str:
    """The canonical name of an operator's or sensor's `kind` (its class's `default` when not given).

    Missing, unknown, or another kind than a named class's (``PyTorchJobOperator(kind="TFJob")``):
    JobValidationError naming `kind` and the fix.
    """
    given = kind if kind is not None else default
    known = ", ".join(k.kind for k in KINDS)
    if not isinstance(given, str):
        raise JobValidationError(
            "kind", "is missing" if given is None else f"is {given!r}", f"pass one of {known}"
        )
    try:
        name = kind_named(given).kind
    except ValueError as error:
        raise JobValidationError("kind", str(error), f"pass one of {known}") from None
    if default is not None and name != default:
        raise JobValidationError(
            "kind",
            f"is {name!r} but {owner} is for {default}s",
            f"leave kind out, or use the class for {name}",
        )
    return name
