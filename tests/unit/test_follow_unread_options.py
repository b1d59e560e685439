"""An option no part of the follow declares is refused by the core, not ignored: ``metrics=`` given to a
follow of no parts (the default) would otherwise collect nothing and say nothing. Options read back from
the wire (a trigger's kwargs, its event) keep carrying another provider version's keys unread."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from airflow_tfjob.follow.core import drain_job, follow_job
from airflow_tfjob.follow.metrics import MetricsPart
from airflow_tfjob.follow.outcome import FollowOptions, FollowOutcome
from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
from airflow_tfjob.integrations.parts import PARTS

# Refused before the follow touches its hook: none is needed.
NO_HOOK = cast(AsyncKubeflowJobHook, object())


def _sink(line: str) -> None:
    del line


def _follow(options: FollowOptions, **kwargs: Any) -> None:
    """follow_job's run made (so any refusal is raised) and closed unawaited."""
    follow_job(NO_HOOK, "job", "ns", options, _sink, **kwargs).close()


def test_a_part_option_without_its_part_is_refused_naming_the_keys_and_the_registry() -> None:
    options = FollowOptions.of(metrics=["loss"], return_marker="R:", log_replicas="all")
    with pytest.raises(ValueError) as refused:
        _follow(options)
    said = str(refused.value)
    assert "'metrics'" in said and "'return_marker'" in said and "log_replicas" not in said
    assert "parts=PARTS" in said and "airflow_tfjob.integrations.parts" in said


def test_the_drain_refuses_it_too_even_with_nothing_left_to_read() -> None:
    earlier = FollowOutcome("succeeded", logs_read=True)
    with pytest.raises(ValueError, match="'metrics'"):
        asyncio.run(drain_job(NO_HOOK, "job", "ns", FollowOptions.of(metrics=["loss"]), _sink, earlier))


def test_the_part_that_owns_the_option_or_the_registry_makes_it_known() -> None:
    _follow(FollowOptions.of(metrics=["loss"]), parts=(MetricsPart,))
    _follow(FollowOptions.of(metrics=["loss"], queue_timeout=60), parts=PARTS)
    _follow(FollowOptions(log_replicas="all"))  # the core's own options need no part
    with pytest.raises(ValueError, match="'queue_timeout'"):
        _follow(FollowOptions.of(metrics=["loss"], queue_timeout=60), parts=(MetricsPart,))


def test_options_read_from_the_wire_carry_another_versions_keys_unread() -> None:
    """A trigger serialized by another provider version still runs (FollowOptions.from_dict)."""
    wire = FollowOptions.of(metrics=["loss"]).to_dict() | {"a_later_option": 1}
    _follow(FollowOptions.from_dict(wire), parts=PARTS)
    _follow(FollowOptions.from_dict(wire).for_drain(), parts=PARTS)
