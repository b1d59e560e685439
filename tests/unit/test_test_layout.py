"""The test tree's own rule: pytest imports each test module by its file name alone (the test folders are
not packages), so two test files of one name in different folders cannot be collected in one run. Each
passes when its folder runs by itself (`make check` runs tests/unit only), and `make test` then fails at
collection; this catches it in the fast lane."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_file_name() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if "__pycache__" not in path.parts:
            places[path.name].append(str(path.relative_to(TESTS)))
    shared = {
        name: sorted(where)
        for name, where in places.items()
        if len(where) > 1 and name not in ("__init__.py", "conftest.py")
    }
    assert not shared, f"rename one of each: {shared}"
