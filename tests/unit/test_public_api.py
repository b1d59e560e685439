"""The public API (operator, sensor, trigger, hook and decorator parameters, hook methods, XCom result
keys) is what tests/unit/recorded/public_api.json recorded: a refactor changes none of it unnoticed."""

from __future__ import annotations

import json
from pathlib import Path

from public_api import describe

RECORDED = Path(__file__).parent / "recorded" / "public_api.json"


def test_public_api_matches_the_recorded_one() -> None:
    recorded = json.loads(RECORDED.read_text())
    current = json.loads(json.dumps(describe()))
    for section in recorded:
        assert current.get(section) == recorded[section], (
            f"the public API changed in {section!r}: if that is intended, regenerate "
            "tests/unit/recorded/public_api.json (see tests/unit/public_api.py) and say so in the changelog"
        )
    assert set(current) == set(recorded)
