"""Secret env names in the provider's annotation, redaction of shown manifests, the masker."""

from __future__ import annotations

import json

import pytest

from airflow_tfjob import constants as c
from airflow_tfjob.build.manifest import build_tfjob
from airflow_tfjob.build.secrets import (
    REDACTED,
    decode_names,
    masked,
    redact,
    secret_env_names,
    secret_values,
    with_secret_names,
)

ODD_NAMES = {"A,B": "v1-comma,value", "C.D": "v2.dotted", "E-F": "v3-dashed", "G": "v4,with,commas"}


def test_names_with_commas_dots_and_dashes_survive_the_annotation() -> None:
    built = build_tfjob("j", image="i", secret_env=ODD_NAMES)
    annotation = built["metadata"]["annotations"][c.ANNOTATION_SECRET_ENV]
    assert json.loads(annotation) == list(ODD_NAMES)
    assert secret_env_names(built) == list(ODD_NAMES)
    assert sorted(secret_values(built)) == sorted(ODD_NAMES.values())
    shown = json.dumps(redact(built))
    assert not any(value in shown for value in ODD_NAMES.values())
    assert all(json.dumps(name) in shown for name in ODD_NAMES)  # names stay visible


def test_names_from_a_template_annotation_are_kept_and_extended() -> None:
    base_annotations = with_secret_names({}, ["FROM_TEMPLATE"])
    base = {"metadata": {"annotations": base_annotations}}
    built = build_tfjob("j", base=base, image="i", secret_env={"NEW": "x1y2z3"})
    assert secret_env_names(built) == ["FROM_TEMPLATE", "NEW"]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('["A,B","C"]', ["A,B", "C"]),
        ("API_TOKEN,DB_PASSWORD", ["API_TOKEN", "DB_PASSWORD"]),  # written by earlier versions
        ("", []),
        ("[broken", []),
        (None, []),
    ],
)
def test_decode_names(text: object, names: list[str]) -> None:
    assert decode_names(text) == names


def test_a_secret_value_is_hidden_wherever_it_occurs_in_a_shown_manifest() -> None:
    built = build_tfjob("j", image="i", secret_env={"TOKEN": "t0ken-value"}, args=["--token=t0ken-value"])
    shown = redact(built)
    container = shown["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["args"] == [f"--token={REDACTED}"]
    assert "t0ken-value" not in json.dumps(shown)
    assert "t0ken-value" in json.dumps(built)  # what is submitted keeps it


def test_values_registered_with_the_masker_are_masked_in_text() -> None:
    from airflow_tfjob.build.secrets import mask_values

    value = "masker-unit-test-value-7731"
    assert masked(f"token={value}") == f"token={value}"
    mask_values([value])
    assert masked(f"token={value}") == "token=***"
