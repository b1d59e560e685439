"""The bad-input suite over `tfjob-local serve --kueue-objects FILE`: every kind such a file may hold,
malformed every way its CRD schema can be broken, generated from the schema itself.

For each kind (kueue/schema.py's ResourceFlavor, ClusterQueue, LocalQueue, WorkloadPriorityClass) a
complete valid object is built from its schema (every field set), and the cases are derived by walking the
schema: every field given a value of a wrong type, every required field removed, every enum given a value
outside it, every integer past its format's range, every list below its minItems and past its maxItems,
every map past its maxProperties, every pattern and maxLength broken, and an unknown field at every level.
A field added to the schema is therefore tried without anyone writing its case. Beside those, the shapes
of the file itself: an unknown kind, no kind, a wrong apiVersion, a document that is not a mapping, a bare
YAML list (refused, as kubectl refuses it), a List holding a bad item, a nested List, a name the API server
refuses, a namespace that does not exist, two objects with one name.

Each case is a file whose first document is a valid object and whose bad object comes after it, run
through the tool's `main` in-process with the serve loop replaced by a recorder: a refusal must be the
usage error (exit 2) naming the document, the object, the field path and the fix, before any cluster is
built; a file that gets through is a failure, and the objects it put in the cluster's store are counted as
leaks (a refusal raised only while the cluster was being built counts its created objects as leaks too).
"""

from __future__ import annotations

import contextlib
import copy
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from badinput_support import Case, FigureLine, Judgement, judge

from airflow_tfjob.local import cli
from airflow_tfjob.local.admission.schemacheck import field_path
from airflow_tfjob.local.kueue import assembly
from airflow_tfjob.local.kueue.schema import KINDS_BY_PLURAL, kueue_schema

Path_ = tuple[str | int, ...]
GROUP = "kueue.x-k8s.io/v1beta2"
KINDS = tuple(KINDS_BY_PLURAL.values())
NAMES = {"ResourceFlavor": "rf", "ClusterQueue": "cq", "LocalQueue": "lq", "WorkloadPriorityClass": "wpc"}
#: A value of another type than each schema type (a mapping for a string or a quantity, a word otherwise).
WRONG = {"string": {"not": "a string"}, "integer": "a-word", "number": "a-word", "boolean": "a-word",
         "object": "a-word", "array": "a-word", "integer,string": {"not": "a quantity"}}  # fmt: skip


def _type(schema: dict[str, Any]) -> str:
    return "integer,string" if schema.get("x-kubernetes-int-or-string") else str(schema.get("type"))


def example(schema: dict[str, Any]) -> Any:
    """A valid value with every field of ``schema`` set."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = _type(schema)
    if kind == "integer,string":
        return "1"
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "array":
        return [example(schema["items"])]
    if kind == "object":
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return {}
        if "properties" in schema:
            return {key: example(sub) for key, sub in schema["properties"].items()}
        return {"k": example(schema["additionalProperties"])}
    return "2026-01-02T03:04:05Z" if schema.get("format") == "date-time" else "a"


def valid_object(kind: str) -> dict[str, Any]:
    """A complete valid object of ``kind`` (LocalQueue's in namespace default)."""
    schema = kueue_schema(kind)
    obj = {key: example(sub) for key, sub in schema["properties"].items() if key not in ("metadata", "status")}
    obj.update(apiVersion=GROUP, kind=kind, metadata={"name": NAMES[kind]})
    if kind == "LocalQueue":
        obj["metadata"]["namespace"] = "default"
    return obj


def schema_nodes(schema: dict[str, Any], path: Path_ = ()) -> Iterator[tuple[Path_, dict[str, Any]]]:
    """Every (path in the example object, schema) below the object's typed fields."""
    yield path, schema
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    for key, sub in (schema.get("properties") or {}).items():
        if path or key not in ("apiVersion", "kind", "metadata", "status"):
            yield from schema_nodes(sub, (*path, key))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from schema_nodes(schema["additionalProperties"], (*path, "k"))
    if isinstance(schema.get("items"), dict):
        yield from schema_nodes(schema["items"], (*path, 0))


def _set(obj: Any, path: Path_, value: Any) -> None:
    for part in path[:-1]:
        obj = obj[part]
    obj[path[-1]] = value


def _delete(obj: Any, path: Path_) -> None:
    for part in path[:-1]:
        obj = obj[part]
    del obj[path[-1]]


def schema_cases(kind: str) -> Iterator[tuple[str, dict[str, Any], str, str]]:
    """(case id, bad object, field path its refusal names, piece of the fix) for every way the schema of
    ``kind`` can be broken."""
    for path, sch in schema_nodes(kueue_schema(kind)):
        name = field_path(path)
        if path:  # the object itself is a mapping by the file's shape (shape_cases)
            bad = valid_object(kind)
            _set(bad, path, WRONG[_type(sch)])
            fix = "a mapping" if name == "spec" else f"write {name} as"
            yield f"{kind}-{name}-wrong-type", bad, name, fix
        for key in sch.get("required", ()):
            bad = valid_object(kind)
            _delete(bad, (*path, key))
            field = f"{name}.{key}" if name else key
            yield f"{kind}-{field}-missing", bad, field, f"add {field}"
        if sch.get("properties") and not sch.get("x-kubernetes-preserve-unknown-fields"):
            bad = valid_object(kind)
            _set(bad, (*path, "notAField"), 1)
            field = f"{name}.notAField" if name else "notAField"
            yield f"{kind}-{field}-unknown", bad, field, "check its spelling"
        if not path:
            continue
        limits = {
            "enum": ("NotOneOfThem", "use one of the supported values"),
            "format": (2**31 if sch.get("format") == "int32" else 2**63, "a whole number from"),
            "minItems": ([], "at least one item"),
            "maxItems": ([example(sch.get("items") or {})] * (sch.get("maxItems", 0) + 1), f"make {name} shorter"),
            "maxProperties": ({f"k{i}": "v" for i in range(sch.get("maxProperties", 0) + 1)}, f"make {name} shorter"),
            "maxLength": ("a" * (sch.get("maxLength", 0) + 1), f"make {name} shorter"),
            "pattern": ("Not_A_Value!", "a quantity such as" if _type(sch) == "integer,string" else "lower-case letters"),
        }  # fmt: skip
        for keyword, (value, fix) in limits.items():
            if keyword in sch and not (keyword == "format" and sch["format"] not in ("int32", "int64")):
                bad = valid_object(kind)
                _set(bad, path, value)
                yield f"{kind}-{name}-{keyword}", bad, name, fix


def _doc(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False)


def _rf(name: str = "first") -> dict[str, Any]:
    return {"apiVersion": GROUP, "kind": "ResourceFlavor", "metadata": {"name": name}}


def shape_cases() -> list[tuple[str, str, str, str]]:
    """(case id, file text after the valid first document, what the refusal names, piece of the fix)."""
    wpc = valid_object("WorkloadPriorityClass")
    lq = valid_object("LocalQueue")
    return [
        ("unknown-kind", _doc({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}),
         "document 2: kind", "ResourceFlavor, ClusterQueue, LocalQueue"),
        ("workload-kind", _doc({"apiVersion": GROUP, "kind": "Workload", "metadata": {"name": "w"}}),
         "document 2: kind", "ResourceFlavor, ClusterQueue, LocalQueue"),
        ("no-kind", _doc({"metadata": {"name": "x"}}), "document 2: kind", "ResourceFlavor, ClusterQueue"),
        ("apiversion-core", _doc({**wpc, "apiVersion": "v1"}), "document 2 (WorkloadPriorityClass): apiVersion",
         "use kueue.x-k8s.io/v1beta2"),
        ("apiversion-future", _doc({**wpc, "apiVersion": "kueue.x-k8s.io/v2"}),
         "document 2 (WorkloadPriorityClass): apiVersion", "use kueue.x-k8s.io/v1beta2"),
        ("scalar-document", "just a string\n", "document 2", "give a mapping"),
        ("number-document", "42\n", "document 2", "give a mapping"),
        ("bare-list", yaml.safe_dump([_rf("a"), _rf("b")]), "document 2 is a YAML list", "kind: List"),
        ("list-with-bad-item", _doc({"apiVersion": "v1", "kind": "List", "items": [_rf("a"), {**wpc, "value": "high"}]}),
         "document 2 item 2 (WorkloadPriorityClass wpc): value", "write value as a whole number"),
        ("list-with-scalar-item", _doc({"apiVersion": "v1", "kind": "List", "items": [_rf("a"), 7]}),
         "document 2 item 2", "give a mapping"),
        ("nested-list", _doc({"apiVersion": "v1", "kind": "List", "items": [{"kind": "List", "items": []}]}),
         "document 2 item 1", "outer List's items"),
        ("list-items-not-a-list", _doc({"apiVersion": "v1", "kind": "List", "items": "rf"}),
         "document 2", "items: [...]"),
        ("metadata-not-a-mapping", _doc({**wpc, "metadata": ["wpc"]}), "metadata", "as a mapping"),
        ("no-name", _doc({**wpc, "metadata": {}}), "metadata.name", "give the object a name"),
        ("name-not-dns", _doc({**wpc, "metadata": {"name": "High_Priority"}}), "metadata.name",
         "lower case alphanumeric"),
        ("namespace-missing", _doc({**lq, "metadata": {"name": "lq", "namespace": "team-a"}}),
         "document 2 (LocalQueue lq)", "namespace that exists"),
        ("same-name-twice", _doc(_rf("first")), "document 2 (ResourceFlavor first)", "its own name"),
        ("localqueue-without-cluster-queue", _doc({**lq, "spec": {}}), "spec.clusterQueue",
         "add spec.clusterQueue"),
    ]  # fmt: skip


# --------------------------------------------------------------------------- running a case


class Refused(Exception):
    """`tfjob-local serve` refused the file as it should: exit 2, one line, no traceback."""


class Unclear(Exception):
    """Anything else: a traceback, another exit status."""


#: The start's own creation of a configured object, wrapped (never a wrapper of a wrapper) to count.
CREATE_OBJECT = assembly.create_object


class Created:
    """The objects `--kueue-objects` put in a cluster's store (the cluster's own creation, counted)."""

    def __init__(self) -> None:
        self.count = 0


def run_serve(path: Path, workdir: Path, created: Created, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tfjob-local serve --kueue-objects PATH` in-process; the serve loop only records that it was
    reached (the file was accepted)."""
    def counting_create(store: Any, obj: Any) -> Any:
        made = CREATE_OBJECT(store, obj)
        created.count += 1
        return made

    async def recorded_serve(runtime: Any) -> int:
        return 0

    monkeypatch.setattr(assembly, "create_object", counting_create)
    monkeypatch.setattr(cli, "serve", recorded_serve)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            status: object = cli.main(["serve", "--workdir", str(workdir), "--kueue-objects", str(path)])
    except SystemExit as exit_:
        status = exit_.code
    except Exception as error:
        raise Unclear(f"Traceback: {type(error).__name__}: {error}") from None
    text = err.getvalue()
    if status == 0:
        return
    if status != 2 or "Traceback" in text:
        raise Unclear(f"exit {status}: {text[-400:]}")
    raise Refused(text)


def all_cases(d: Path, created: Created, monkeypatch: pytest.MonkeyPatch) -> list[Case]:
    first = _doc(_rf("first")) + "---\n"
    cases = []

    def add(case_id: str, text: str, field: str, fix: str) -> None:
        path = d / f"{case_id}.yaml"
        path.write_text(text)
        cases.append(Case(case_id, lambda: run_serve(path, d / "work", created, monkeypatch), field, fix))

    for kind in KINDS:
        for case_id, bad, name, fix in schema_cases(kind):
            add(case_id, first + _doc(bad), f"document 2 ({kind} {NAMES[kind]}): {name}", fix)
    for case_id, text, field, fix in shape_cases():
        add(case_id, first + text, field, fix)
    return cases


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FigureLine]:
    d = tmp_path_factory.mktemp("kueue-objects")
    created = Created()
    line = FigureLine("kueue-objects")
    with pytest.MonkeyPatch.context() as monkeypatch:
        for case in all_cases(d, created, monkeypatch):
            before = created.count
            judgement = judge(case, refusals=(Refused,), counter=created)  # type: ignore[arg-type]
            judgement.detail += f" [{created.count - before} created]"
            line.add(judgement)
        leaks = created.count
    counts = line.counts()
    # Refused before start: exit 2 with nothing created, whatever the message; naming: and it names the
    # document, the object, the field and the fix (judge's "refused").
    refused_before = sum(1 for j in line.judgements
                         if j.outcome == "refused" or (j.outcome == "unclear" and j.detail.startswith("Refused")))
    print(f"kueue-objects: {counts['tried']} tried, {refused_before} refused before start, {counts['refused']} "
          f"naming the document, the object, the field and the fix, {leaks} leaks (objects created)")
    print(line.line())
    line.write()
    yield line


def test_figure_line(judged: FigureLine) -> None:
    kinds_tried = {j.case.id.split("-")[0] for j in judged.judgements}
    assert set(KINDS) <= kinds_tried
    assert judged.counts()["tried"] >= 150
    assert judged.failures() == [], "\n".join(str(f) for f in judged.failures())


def test_every_way_is_tried_for_each_kind(judged: FigureLine) -> None:
    """The walk reaches the issue's case (a word for an int32) and each way of breaking a schema."""
    ids = {j.case.id for j in judged.judgements}
    assert {"WorkloadPriorityClass-value-wrong-type", "WorkloadPriorityClass-value-format",
            "WorkloadPriorityClass-value-missing", "bare-list"} <= ids  # fmt: skip
    for kind in KINDS:
        ways = {i.rsplit("-", 1)[-1] for i in ids if i.startswith(kind + "-")}
        assert {"type", "unknown"} <= ways, (kind, ways)
    assert {"enum", "format", "minItems", "maxItems", "maxProperties", "maxLength", "pattern", "missing"} <= {
        i.rsplit("-", 1)[-1] for i in ids}  # fmt: skip


def test_each_valid_object_is_created_and_a_kind_list_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator's objects are valid (so each case has one fault): all four, complete, are created; the
    same as a `kind: List` too. v1beta1 objects are converted as the API server converts them."""
    objects = [valid_object(kind) for kind in KINDS]
    for text in ("---\n".join(_doc(o) for o in objects),
                 _doc({"apiVersion": "v1", "kind": "List", "items": objects})):  # fmt: skip
        path = tmp_path / "all.yaml"
        path.write_text(text)
        created = Created()
        run_serve(path, tmp_path / "work", created, monkeypatch)
        assert created.count == len(KINDS)
    v1beta1 = copy.deepcopy(valid_object("ClusterQueue"))
    v1beta1["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    v1beta1["spec"]["cohort"] = v1beta1["spec"].pop("cohortName")
    path = tmp_path / "old.yaml"
    path.write_text(_doc(v1beta1))
    created = Created()
    run_serve(path, tmp_path / "work", created, monkeypatch)
    assert created.count == 1


def test_the_server_refuses_what_the_file_check_refuses() -> None:
    """One check, two doors: a create request to the local API server answers the same 422."""
    from airflow_tfjob.local.kueue.jobs import KueueWebhook
    from airflow_tfjob.local.model.resources import ApiError
    from airflow_tfjob.local.store.core import Store

    store = Store(admission=KueueWebhook(None, ()))
    wpc = {**valid_object("WorkloadPriorityClass"), "value": "high"}
    with pytest.raises(ApiError) as refused:
        store.create("workloadpriorityclasses", None, wpc)
    assert refused.value.code == 422 and 'value: Invalid value: "string": value in body must be of type integer' in (
        refused.value.message)  # fmt: skip


def _ids() -> list[str]:
    return [case_id for kind in KINDS for case_id, *_ in schema_cases(kind)] + [c[0] for c in shape_cases()]


@pytest.mark.parametrize("case_id", _ids())
def test_case(judged: FigureLine, case_id: str) -> None:
    judgement: Judgement = next(j for j in judged.judgements if j.case.id == case_id)
    assert judgement.outcome == "refused", str(judgement)
