"""The local cluster's YAML files (`--role`, `--kueue-objects`), loaded with the limits the provider's
templates have (build/templates.py; the local cluster may not import it): a size bound, duplicate keys
refused, aliases that expand past a bound refused before anything walks them, annotations within
Kubernetes' 256 KiB. Errors name the option, the file, the document and the position, never the content:
these files may be anything a user points at, a system file holding password hashes included. Lists are
read as `kubectl apply -f` reads them: a List's items are objects, a bare YAML sequence is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

#: A file of a few Roles or Kueue objects is kilobytes; this bounds what is read at all.
MAX_FILE_BYTES = 4 << 20
#: Nodes one document may expand to through aliases (build/templates.py's bound).
MAX_NODES = 100_000
#: Kubernetes' bound on an object's annotations, keys and values together.
MAX_ANNOTATION_BYTES = 256 << 10


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader refusing duplicate mapping keys, as kubectl does."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # an unhashable key: the base class reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, "a duplicate key", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _expanded_size(node: Any, sizes: dict[int, int]) -> int:
    known = sizes.get(id(node))
    if known is not None:
        return known
    sizes[id(node)] = 1  # a recursive alias counts once
    total = 1
    if isinstance(node.value, list):
        for item in node.value:
            for child in item if isinstance(item, tuple) else (item,):
                total += _expanded_size(child, sizes)
                if total > MAX_NODES:
                    break
    sizes[id(node)] = total
    return total


def _is_list(data: Any) -> bool:
    """A List object (``kind: List``, or ``<Kind>List`` as ``kubectl get -o yaml`` writes): what kubectl
    apply reads as its items."""
    return isinstance(data, dict) and isinstance(data.get("kind"), str) and data["kind"].endswith("List")


def _objects_of(data: Any, file: str, number: int) -> list[tuple[str, Any]]:
    """The objects document ``number`` of ``file`` holds, labelled: itself, or the items of a List. A bare
    YAML sequence is refused, as kubectl refuses it ("cannot unmarshal array into Go value of type map"):
    taking its items silently would read a file that kubectl cannot apply."""
    label = f"document {number}"
    if isinstance(data, list):
        raise ValueError(
            f"{file} {label} is a YAML list ({len(data)} items), which kubectl refuses too; write each object "
            "as its own document (separated by ---), or wrap them in a List: apiVersion: v1, kind: List, "
            "items: [...]"
        )
    if not _is_list(data):
        return [(label, data)]
    items = data.get("items")
    if not isinstance(items, list):
        raise ValueError(f"{file} {label} is a {data['kind']} whose items is not a list; write items: [...] "
                         "with the objects")
    labelled = []
    for item_number, item in enumerate(items, 1):
        if _is_list(item) or isinstance(item, list):
            raise ValueError(f"{file} {label} item {item_number} is itself a list; put its objects among the "
                             "outer List's items")
        labelled.append((f"{label} item {item_number}", item))
    return labelled


def load_labelled(path: Path, option: str) -> list[tuple[str, Any]]:
    """Every object of the YAML file at ``path``, labelled as its errors name it: ``document N``, or
    ``document N item M`` for the items of a List (as ``kubectl apply`` takes a List; a bare YAML sequence
    is refused, as kubectl refuses it). Empty documents are skipped but counted. ``option`` names where
    the file was given, for the errors."""
    where = f"{option} {path}"
    try:
        size = path.stat().st_size
        if not path.is_file():
            raise ValueError(f"{where} is not a file; give the path of a YAML file")
    except FileNotFoundError:
        raise ValueError(f"{where}: no such file; give the path of a YAML file") from None
    except OSError as exc:
        raise ValueError(f"{where}: cannot read it ({exc.strerror}); give a readable YAML file") from None
    if size > MAX_FILE_BYTES:
        raise ValueError(
            f"{where} is {size} bytes, over the {MAX_FILE_BYTES >> 20} MiB such a file may hold; "
            "split it or make it smaller"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where} is not UTF-8 text; give a YAML file") from None
    except OSError as exc:
        raise ValueError(f"{where}: cannot read it ({exc.strerror}); give a readable YAML file") from None
    documents: list[tuple[str, Any]] = []
    loader = _StrictLoader(text)
    number = 0
    try:
        while loader.check_node():
            number += 1
            node = loader.get_node()
            if _expanded_size(node, {}) > MAX_NODES:
                raise ValueError(
                    f"{where} document {number} expands through YAML aliases to more than "
                    f"{MAX_NODES} nodes; write it without anchors and aliases (*name)"
                )
            data = loader.construct_document(node)
            if data is not None:
                documents.extend(_objects_of(data, where, number))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = str(getattr(exc, "problem", None) or type(exc).__name__).split("\n")[0]
        raise ValueError(
            f"{where} document {number or 1} is not valid YAML{at}: {problem[:80]}; fix the YAML "
            "there (the file's content is not shown: it may hold credentials)"
        ) from None
    finally:
        loader.dispose()
    return documents


def check_metadata(obj: Mapping[str, Any], where: str) -> str:
    """``obj``'s metadata as an API server would take it: a mapping with a name, labels and annotations
    of strings within the size bound; its name."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise ValueError(
            f"{where}: metadata must be a mapping, got a {type(meta).__name__}; write it as a "
            "mapping, e.g. metadata: {name: my-object}"
        )
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(
            f"{where}: metadata.name is missing or not a string; give the object a name "
            "(metadata: {name: my-object})"
        )
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise ValueError(f"{where}: metadata.{key} must map strings to strings; quote the values")
        if key == "annotations":
            total = sum(len(k.encode()) + len(v.encode()) for k, v in value.items())
            if total > MAX_ANNOTATION_BYTES:
                raise ValueError(
                    f"{where}: metadata.annotations total {total} bytes, over Kubernetes' "
                    "256 KiB bound; keep large data out of annotations"
                )
    return name
