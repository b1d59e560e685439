"""A registered secret anywhere in any templated field, at any depth, is masked in what Airflow stores as
the task's rendered fields (issue 39).

The class, enumerated: every templated field of every job operator (the five v1 kinds', the generic
one's, TrainJobOperator's) and of the decorators' operators holds a value registered with Airflow's
masker at depths 1 to 12, once as a string's part and once as a dict key. Each operator is rendered as a
task renders, and what is stored is read at the lowest level that shows it: Airflow's own serialization
of the rendered fields on the installed release (3.1+: the task runner's ``_serialize_rendered_fields``,
which masks to depth 5; 3.0: the same function, unmasked, since 3.0's API server masks with a masker that
never saw the worker's registrations). The figure line counts tried / masked / leaks, and what Airflow
alone would have leaked without the operators' own walk.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from badinput_support import TaskInstance, task_context

DEPTHS = range(1, 13)
PLACES = ("value", "key")


def _operators() -> dict[str, Any]:
    from airflow_tfjob.decorators.pytorchjob import _PyTorchJobDecoratedOperator
    from airflow_tfjob.decorators.tfjob import _TFJobDecoratedOperator
    from airflow_tfjob.operators.generic import KubeflowJobOperator
    from airflow_tfjob.operators.jaxjob import JAXJobOperator
    from airflow_tfjob.operators.paddlejob import PaddleJobOperator
    from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator
    from airflow_tfjob.operators.tfjob import TFJobOperator
    from airflow_tfjob.operators.trainjob import TrainJobOperator
    from airflow_tfjob.operators.xgboostjob import XGBoostJobOperator

    def train(x: int) -> int:
        return x

    common = {"image": "img:1", "render_only": True}
    return {
        "TFJobOperator": lambda: TFJobOperator(task_id="t", worker=1, **common),
        "PyTorchJobOperator": lambda: PyTorchJobOperator(task_id="t", worker=1, **common),
        "XGBoostJobOperator": lambda: XGBoostJobOperator(task_id="t", worker=1, **common),
        "JAXJobOperator": lambda: JAXJobOperator(task_id="t", worker=1, **common),
        "PaddleJobOperator": lambda: PaddleJobOperator(task_id="t", worker=1, **common),
        "KubeflowJobOperator": lambda: KubeflowJobOperator(task_id="t", kind="TFJob", worker=1, **common),
        "TrainJobOperator": lambda: TrainJobOperator(task_id="t", runtime="torch-distributed", **common),
        "@task.tfjob": lambda: _TFJobDecoratedOperator(
            task_id="t", python_callable=train, op_args=[1], op_kwargs={}, **common
        ),
        "@task.pytorchjob": lambda: _PyTorchJobDecoratedOperator(
            task_id="t", python_callable=train, op_args=[1], op_kwargs={}, **common
        ),
    }


def _nested(secret: str, depth: int, place: str) -> Any:
    """``secret`` ``depth`` containers below the field (dicts and lists in turn, the innermost a dict):
    as part of a string value (a sidecar's ``Bearer <token>``), or as a dict key."""
    inner: Any = {secret: "v"} if place == "key" else {"value": f"Bearer {secret}"}
    for level in range(depth - 1):
        inner = [inner] if level % 2 == 0 else {"spec": inner}
    return inner


def _stored(op: Any) -> dict[str, Any]:
    """What Airflow would store (and the UI show) of ``op``'s rendered fields, by its own functions.

    From 3.1 the task runner masks them with the worker's masker. 3.0's sends them unmasked, and its API
    server masks them with its own masker, which knows no value a worker registered: only its masking by
    key name (a field or key called ``secret_env``, ``token``...) applies, modelled by an empty masker.
    """
    from airflow.sdk.execution_time.task_runner import _serialize_rendered_fields

    from airflow_tfjob.version_compat import AIRFLOW_V_3_1_PLUS

    fields = _serialize_rendered_fields(op)
    if AIRFLOW_V_3_1_PLUS:
        return fields  # type: ignore[no-any-return]
    masker = _masker()
    patterns, replacer = masker.patterns, masker.replacer
    masker.patterns, masker.replacer = set(), None
    try:
        return {name: masker.redact(value, name) for name, value in fields.items()}
    finally:
        masker.patterns, masker.replacer = patterns, replacer


def _masker() -> Any:
    """The masker a task's process registers secrets with on the installed release."""
    from airflow_tfjob.version_compat import AIRFLOW_V_3_1_PLUS

    if AIRFLOW_V_3_1_PLUS:
        from airflow.sdk._shared.secrets_masker import _secrets_masker
    else:
        from airflow.sdk.execution_time.secrets_masker import _secrets_masker  # type: ignore[no-redef]
    return _secrets_masker()


@pytest.fixture
def masker() -> Iterator[Any]:
    """The process's masker, given back as it was: the secrets one test registers stay its own."""
    masker = _masker()
    patterns, replacer = set(masker.patterns), masker.replacer
    try:
        yield masker
    finally:
        masker.patterns, masker.replacer = patterns, replacer


def _register(masker: Any, secret: str) -> None:
    """``secret`` as the only value registered (the one a run plants), through Airflow's own call."""
    from airflow_tfjob.build.secrets import mask_values

    masker.patterns, masker.replacer = set(), None
    mask_values([secret])
    assert masker.replacer is not None


def test_a_registered_secret_at_any_depth_in_any_templated_field_is_masked_in_the_stored_fields(
    masker: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    tried = masked = 0
    leaks: list[str] = []
    restored_wrong: list[str] = []
    airflow_alone = 0
    operators = _operators()
    for op_name, make in operators.items():
        fields = list(make().template_fields)
        for depth in DEPTHS:
            for place in PLACES:
                op = make()
                secret = f"s3cr3t-{op_name[-9:]}-{depth:02d}-{place}"
                _register(masker, secret)
                values = {f: _nested(secret, depth, place) for f in fields}
                for field, value in values.items():
                    setattr(op, field, value)
                op.render_template_fields(task_context(TaskInstance()))
                stored = _stored(op)
                op._unhide_rendered_secrets()  # execute's first step: the job gets the values as rendered
                unhidden = _stored(op)  # the values as rendered, as Airflow alone would store them
                for field in fields:
                    tried += 1
                    shown = json.dumps(stored.get(field), default=str)
                    if secret in shown:
                        leaks.append(f"{op_name}.{field} depth {depth} as {place}")
                    else:
                        masked += 1
                    airflow_alone += secret in json.dumps(unhidden.get(field), default=str)
                    if getattr(op, field) != values[field]:
                        restored_wrong.append(f"{op_name}.{field} depth {depth} as {place}")
    line = (
        f"rendered-fields secrets: {tried} tried ({len(operators)} operators x their templated fields x "
        f"depths 1-12 x value/key), {masked} masked, {len(leaks)} leaks "
        f"(Airflow's own masking alone would leak {airflow_alone})"
    )
    with capsys.disabled():
        print("\n" + line)
    assert tried >= len(operators) * len(DEPTHS) * len(PLACES) * 20
    assert leaks == [], "\n".join(leaks[:40])
    assert restored_wrong == [], "\n".join(restored_wrong[:40])


@pytest.mark.parametrize("depth", [1, 6, 12])
def test_the_issue_case_a_patch_repeating_a_secret_env_value_is_masked_at_any_depth(
    masker: Any, depth: int
) -> None:
    """The issue's report: ``secret_env={"API_TOKEN": s}`` and a runtime patch whose sidecar repeats ``s``."""
    from airflow_tfjob.operators.trainjob import TrainJobOperator

    secret = f"patch-token-{depth:02d}-x7"
    patch = {"manager": "example.com/m", "trainingRuntimeSpec": _nested(secret, depth, "value")}
    op = TrainJobOperator(
        task_id="t",
        runtime="torch-distributed",
        image="img:1",
        render_only=True,
        secret_env={"API_TOKEN": secret},
        runtime_patches=[patch],
    )
    op.render_template_fields(task_context(TaskInstance()))
    assert secret not in json.dumps(_stored(op), default=str)
    op._unhide_rendered_secrets()
    assert op.runtime_patches == [patch]


def test_objects_airflow_turns_into_structures_or_text_are_masked_inside(masker: Any) -> None:
    """A kubernetes model (Airflow serializes its ``to_dict()``), an object with ``serialize()``, and one
    whose text shows the secret, each deeper than Airflow's masking reaches."""
    from kubernetes.client import V1Container, V1EnvVar

    from airflow_tfjob.build.secrets import hidden

    secret = "objects-s3cr3t-value"
    _register(masker, secret)

    class Serializable:
        def serialize(self) -> Any:
            return {"a": [{"b": [{"c": secret}]}]}

    class Texty:
        def __str__(self) -> str:
            return f"Texty({secret})"

    container = V1Container(name="c", env=[V1EnvVar(name="X", value=f"pre-{secret}")])
    value = [[[[{"k": [container, Serializable(), Texty()]}]]]]
    shown = hidden(value)
    assert secret not in json.dumps(shown, default=str)
    plain = [[{"k": "nothing to hide", 3: None}], ("t",)]
    assert hidden(plain) is plain  # a field without a secret is not copied


def test_a_field_longer_than_airflow_shows_is_masked_before_airflow_cuts_it(masker: Any) -> None:
    """Past ``[core] max_templated_field_length`` Airflow shows the field's text cut short. From 3.1 it
    masks that text itself; on 3.0 only the operators' walk hides a worker's secret in it."""
    from airflow_tfjob.operators.tfjob import TFJobOperator

    secret = "long-field-s3cr3t"
    _register(masker, secret)
    op = TFJobOperator(task_id="t", image="img:1", worker=1, render_only=True)
    op.hyperparameters = {"pad": "x" * 5000, "deep": _nested(secret, 9, "value")}
    op.render_template_fields(task_context(TaskInstance()))
    shown = json.dumps(_stored(op)["hyperparameters"], default=str)
    assert "x" * 100 in shown and secret not in shown
