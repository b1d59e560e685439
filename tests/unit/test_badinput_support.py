"""The bad-input suite's judge puts each case in the class it belongs to, and the counter counts."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from badinput_support import Case, FigureLine, RequestCounter, judge

from airflow_tfjob.build.checker import JobValidationError


def _refuse(field: str = "worker", fix: str = "use worker=2", message: str = "") -> None:
    raise JobValidationError(field, message or "is not a number", fix)


def test_each_class(tmp_path: Path) -> None:
    line = FigureLine("selftest")
    with RequestCounter(tmp_path) as counter:

        def after_a_request() -> None:
            url = counter.kubeconfig.read_text().split('"server": "')[1].split('"')[0]
            try:
                urllib.request.urlopen(f"{url}/api")
            except OSError:
                pass
            _refuse()

        cases = {
            "refused": Case("refused", _refuse, "worker", "worker=2"),
            "accepted": Case("accepted", lambda: None, "worker", "worker=2"),
            "unclear": Case("unclear", lambda: int("x"), "worker", "worker=2"),
            "unclear-field": Case("unclear-field", lambda: _refuse(field="image", fix="use a tag"), "worker", "a tag"),
            "after_request": Case("after_request", after_a_request, "worker", "worker=2"),
        }
        outcomes = {key: line.add(judge(c, refusals=(JobValidationError,), counter=counter)).outcome
                    for key, c in cases.items()}  # fmt: skip
        assert counter.count == 1
    assert outcomes == {
        "refused": "refused", "accepted": "accepted", "unclear": "unclear", "unclear-field": "unclear",
        "after_request": "after_request",
    }  # fmt: skip
    leak = judge(Case("leak", lambda: _refuse(message="value s3cr3t"), "worker", "worker=2", secret="s3cr3t"),
                 refusals=(JobValidationError,))  # fmt: skip
    assert (leak.outcome, leak.leaked) == ("refused", True)
    line.add(leak)
    assert line.counts() == {
        "tried": 6,
        "refused": 2,
        "accepted": 1,
        "unclear": 2,
        "after_request": 1,
        "leaked": 1,
    }
    assert "6 tried, 2 refused" in line.line()
