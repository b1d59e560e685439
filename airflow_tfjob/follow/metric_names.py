"""The names a metrics collector may be asked for: Katib's StdOut format's, and not the result's own keys.

Apart from the metrics part (:mod:`airflow_tfjob.follow.metrics`) so that what checks a list of names
where a trigger is made (the asset trigger's constructor: in a DAG file, on the triggerer's event loop)
imports nothing of the follow core.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: Keys of the metrics result, which no metric may be named after.
RESERVED_KEYS = ("history", "missing")


def check_metric_names(names: Sequence[str]) -> None:
    """ValueError if a name can never match the Katib StdOut format or is one of :data:`RESERVED_KEYS`."""
    bad = [n for n in names if not isinstance(n, str) or not re.fullmatch(r"[\w|-]+", n)]
    if bad:
        raise ValueError(
            f"metric names {bad!r} can never match the Katib StdOut format: "
            f"use letters, digits, '_', '-' or '|' only"
        )
    reserved = [n for n in names if n in RESERVED_KEYS]
    if reserved:
        raise ValueError(
            f"metric names {reserved!r} are reserved for the result's own keys {RESERVED_KEYS}: "
            f"print the metric under another name"
        )
