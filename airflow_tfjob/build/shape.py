"""The structure of a base manifest, checked before parameters are merged into it.

The builder fills in what is missing (no ``metadata``: an empty one). A part that is there but of
the wrong type (``spec: [...]``, ``containers: {name: tensorflow}``) must not be taken for
missing: it would be replaced by an empty value and the user's content silently lost. This walks
every part the builder reads or writes and reports each one of the wrong type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_tfjob.build.checker import Problem

_POD_LISTS = ("containers", "initContainers", "volumes", "tolerations", "imagePullSecrets")
_CONTAINER_LISTS = ("command", "args", "env", "envFrom", "volumeMounts", "ports")


class _Walk:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def map(self, parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
        return self._expect(
            parent.get(key), f"{path}.{key}" if path else key, Mapping, "a mapping", "key: value pairs"
        )

    def list(self, parent: Mapping[str, Any], key: str, path: str) -> list[Any]:
        return self._expect(parent.get(key), f"{path}.{key}", list, "a list", "a YAML/JSON list")

    def item(self, value: Any, path: str) -> Mapping[str, Any]:
        return self._expect(value, path, Mapping, "a mapping", "key: value pairs")

    def _expect(self, value: Any, path: str, kind: type, what: str, form: str) -> Any:
        empty: Any = {} if kind is Mapping else []
        if value is None:
            return empty
        if isinstance(value, kind):
            return value
        self.problems.append(
            Problem(
                path,
                f"is a {type(value).__name__}, not {what} (it would be lost if taken as missing)",
                f"write {path.rsplit('.', 1)[-1]} as {form}",
            )
        )
        return empty


def shape_problems(manifest: Mapping[str, Any], spec_key: str = "tfReplicaSpecs") -> list[Problem]:
    """A Problem for every part of ``manifest`` the builder touches that has the wrong type.

    ``spec_key``: where the kind keeps its replica specs (``pytorchReplicaSpecs``, ...).
    """
    walk = _Walk()
    metadata = walk.map(manifest, "metadata", "")
    for key in ("labels", "annotations"):
        walk.map(metadata, key, "metadata")
    spec = walk.map(manifest, "spec", "")
    run_policy = walk.map(spec, "runPolicy", "spec")
    walk.map(run_policy, "schedulingPolicy", "spec.runPolicy")
    specs = walk.map(spec, spec_key, "spec")
    for rtype, replica in specs.items():
        rpath = f"spec.{spec_key}.{rtype}"
        if replica is None:
            continue  # validation reports an empty replica spec
        template = walk.map(walk.item(replica, rpath), "template", rpath)
        tpath = f"{rpath}.template"
        template_meta = walk.map(template, "metadata", tpath)
        for key in ("labels", "annotations"):
            walk.map(template_meta, key, f"{tpath}.metadata")
        pod = walk.map(template, "spec", tpath)
        ppath = f"{tpath}.spec"
        walk.map(pod, "nodeSelector", ppath)
        lists = {key: walk.list(pod, key, ppath) for key in _POD_LISTS}
        for group in ("containers", "initContainers"):
            for i, raw in enumerate(lists[group]):
                cpath = f"{ppath}.{group}[{i}]"
                container = walk.item(raw, cpath)
                for key in _CONTAINER_LISTS:
                    walk.list(container, key, cpath)
                resources = walk.map(container, "resources", cpath)
                for key in ("requests", "limits"):
                    walk.map(resources, key, f"{cpath}.resources")
    return walk.problems
