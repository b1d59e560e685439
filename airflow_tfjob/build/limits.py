"""Size limits: a manifest the API server would refuse, and manifests shown in the log and XCom.

The API server refuses a request body over about 1.5 MiB (etcd's request limit) with an error that
does not say which field is large; :func:`check_request_size` refuses it before submission and
names the largest fields. A manifest printed to the task log or pushed to XCom is bounded by
:func:`bounded`: each long string is cut and the cut is said, so a large inline value (a config file
in an env var, say) never floods the log or the metadata database.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from airflow_tfjob.build.checker import JobValidationError

MAX_REQUEST_BYTES = 1_572_864  # 1.5 MiB
MAX_SHOWN_STRING = 2048
MAX_SHOWN_TOTAL = 256 * 1024


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), default=str).encode("utf-8"))


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]")
    else:
        yield path, value


def check_request_size(manifest: Mapping[str, Any]) -> None:
    """Refuse a manifest too large for the API server, naming its three largest fields."""
    total = _size(manifest)
    if total <= MAX_REQUEST_BYTES:
        return
    largest = sorted(((_size(v), p) for p, v in _leaves(manifest, "")), reverse=True)[:3]
    shown = ", ".join(f"{p} ({n} bytes)" for n, p in largest)
    raise JobValidationError(
        "tfjob",
        f"the manifest is {total} bytes, over the API server's request limit of about "
        f"{MAX_REQUEST_BYTES} bytes (1.5 MiB); largest fields: {shown}",
        "move large values out of the manifest (a ConfigMap or Secret mounted as a volume, or a file in the image)",
    )


def bounded(value: Any, cut: list[str] | None = None, path: str = "") -> Any:
    """A copy of ``value`` with every string over MAX_SHOWN_STRING characters cut, saying how much.

    ``cut`` collects the paths of the strings that were cut.
    """
    if isinstance(value, str):
        if len(value) <= MAX_SHOWN_STRING:
            return value
        if cut is not None:
            cut.append(path)
        return f"{value[:MAX_SHOWN_STRING]}... [{len(value) - MAX_SHOWN_STRING} more characters not shown]"
    if isinstance(value, Mapping):
        return {k: bounded(v, cut, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [bounded(v, cut, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def shown_json(manifest: Mapping[str, Any]) -> str:
    """The manifest as indented JSON for the task log, long strings cut and the text bounded."""
    cut: list[str] = []
    text = json.dumps(bounded(manifest, cut), indent=2, default=str)
    if len(text) > MAX_SHOWN_TOTAL:
        text = f"{text[:MAX_SHOWN_TOTAL]}\n... [{len(text) - MAX_SHOWN_TOTAL} more characters not shown]"
    if cut:
        text += f"\n(long values cut for the log: {', '.join(cut[:10])}{' ...' if len(cut) > 10 else ''})"
    return text
