"""Griffe extension for the documentation site: the code's docstrings use reST roles
(``:class:`~airflow_tfjob.jobs.kinds.JobKind```), which Markdown would show as literal text. Each becomes a
code span with the name as Sphinx would show it (the last part after ``~``).

Only code spans, not links: a link to an object the site does not document would be a warning, and
warnings fail the build.

A bullet list written right under its lead-in line (``Lifecycle:`` then ``  * ...``), as plain-text
docstrings do, would be one run-on paragraph in Markdown, which starts a list only after a blank line:
the blank line is added.

A signature's default that names a module constant (``api_retry_timeout=DEFAULT_RETRY_TIMEOUT``,
``kill_grace_period=cleanup.KILL_GRACE_PERIOD``) is shown as the constant's value (``240.0``, ``1``): a
reader wants the number, not a name to look up. Names of anything but a literal stay as written.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any

import griffe

ITEM = re.compile(r" {0,3}[*+-] ")
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj):`(~?)([^`]+)`")


def plain(text: str) -> str:
    """The docstring ``text`` with every reST role written as a Markdown code span."""

    def span(match: re.Match[str]) -> str:
        name = match.group(2)
        return f"`{name.rsplit('.', 1)[-1] if match.group(1) else name}`"

    return ROLE.sub(span, text)


def separate_lists(text: str) -> str:
    """``text`` with a blank line before every bullet list that follows a line of prose directly
    (fenced code left as it is)."""
    lines: list[str] = []
    in_list = in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        item = not in_fence and ITEM.match(line) is not None
        if item and not in_list and lines and lines[-1].strip():
            lines.append("")
        # A list goes on over its items' continuation lines, up to a blank line.
        in_list = (in_list or item) and bool(line.strip())
        lines.append(line)
    return "\n".join(lines)


class ReSTRoles(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **_: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = separate_lists(plain(obj.docstring.value))


def constant_value(default: Any, scope: griffe.Object) -> str | None:
    """The literal value of the module constant that ``default`` (a signature's default as griffe reads
    it) names, resolved from ``scope``'s modules; None when it names no constant with a literal value."""
    if not isinstance(default, (griffe.ExprName, griffe.ExprAttribute)):
        return None
    try:
        target = scope.modules_collection[default.canonical_path]
        if target.is_alias:
            target = target.final_target
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    value = getattr(target, "value", None)
    if not isinstance(target, griffe.Attribute) or value is None:
        return None
    try:
        ast.literal_eval(str(value))
    except (ValueError, SyntaxError):
        return None
    return str(value)


def _functions(obj: griffe.Object) -> Iterator[griffe.Function]:
    for member in obj.members.values():
        if member.is_alias:
            continue
        if isinstance(member, griffe.Function):
            yield member
        elif isinstance(member, (griffe.Module, griffe.Class)):
            yield from _functions(member)


class ConstantDefaults(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **_: Any) -> None:
        # Once the whole package is loaded, every constant a default names can be found.
        for function in _functions(pkg):
            for parameter in function.parameters:
                value = constant_value(parameter.default, function)
                if value is not None:
                    parameter.default = value
