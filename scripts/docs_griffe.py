"""Griffe extension for the documentation site: the code's docstrings use reST roles
(``:class:`~airflow_tfjob.kinds.JobKind```), which Markdown would show as literal text. Each becomes a
code span with the name as Sphinx would show it (the last part after ``~``).

Only code spans, not links: a link to an object the site does not document would be a warning, and
warnings fail the build.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj):`(~?)([^`]+)`")


def plain(text: str) -> str:
    """The docstring ``text`` with every reST role written as a Markdown code span."""

    def span(match: re.Match[str]) -> str:
        name = match.group(2)
        return f"`{name.rsplit('.', 1)[-1] if match.group(1) else name}`"

    return ROLE.sub(span, text)


class ReSTRoles(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **_: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
