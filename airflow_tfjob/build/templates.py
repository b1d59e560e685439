"""Template files for ``tfjob``: where they may come from, and how their text becomes a manifest.

One set of rules for the operator (rendered with Airflow's Jinja environment) and for
:func:`airflow_tfjob.build.manifest.load_manifest` (plain Jinja):

- A value is a file path only when it is one line ending in ``.yaml``/``.yml``/``.json`` and was
  written by the DAG author: the operator decides this on the value *before* rendering, so a value
  that comes from DAG-run params is text, never a path (unless the author opts in).
- The file must resolve, symlinks included, inside the DAG's folder or one of its
  ``template_searchpath`` folders. There is no fallback to the worker's current directory. An
  absolute path, or a ``..`` that leaves those folders, is refused unless the author opts in with
  ``allow_template_outside_dag_folder``: a DAG-run trigger must not be able to read worker files.
- YAML is parsed safely, duplicate mapping keys are refused (as kubectl refuses them) and aliases
  that would expand to a huge document are refused before anything walks it. Errors name the file,
  the line and ``tfjob`` but quote no content: a template may hold credentials.
"""

from __future__ import annotations

import copy
import json
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import yaml

from airflow_tfjob.build.checker import JobValidationError

if TYPE_CHECKING:
    import jinja2

TEMPLATE_EXTENSIONS = (".yaml", ".yml", ".json")
# Nodes a YAML document may expand to through aliases; a real TFJob has a few hundred.
MAX_YAML_NODES = 100_000
OPT_IN = "allow_template_outside_dag_folder=True"


class TemplateNotFoundError(JobValidationError):
    """The template file is not (yet) there: at DAG parse time that is not an error yet."""


def looks_like_path(value: Any) -> bool:
    """A one-line string naming a .yaml/.yml/.json file (YAML or JSON text never looks like this)."""
    if not isinstance(value, str):
        return False
    stripped = value.strip()
    return (
        bool(stripped)
        and "\n" not in stripped
        and stripped.lower().endswith(TEMPLATE_EXTENSIONS)
        and ": " not in stripped
        and not stripped.startswith(("{", "["))
    )


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def resolve_template_path(value: str, folders: Iterable[str | Path], *, allow_outside: bool = False) -> Path:
    """The template file ``value`` names, resolved (symlinks followed) inside one of ``folders``.

    Raises JobValidationError naming ``tfjob``, the path and the allowed folders when it is
    outside them (without the opt-in) or does not exist.
    """
    roots = [Path(f).expanduser().resolve() for f in folders if str(f)]
    text = value.strip()
    given = Path(text).expanduser()
    allowed = ", ".join(str(r) for r in roots) or "none given"
    candidates = [given] if given.is_absolute() else [root / given for root in roots]
    outside: list[Path] = []
    for candidate in candidates:
        resolved = candidate.resolve()
        if not allow_outside and not any(_inside(resolved, root) for root in roots):
            outside.append(resolved)
            continue
        if resolved.is_file():
            return resolved
    if outside:
        raise JobValidationError(
            "tfjob",
            f"template path {text!r} resolves to {str(outside[0])!r}, outside the folders templates may "
            f"come from ({allowed})",
            "put the file in the DAG's folder or its template_searchpath and give its relative path, "
            f"or, if the DAG author means it, pass {OPT_IN} to the operator",
        )
    raise TemplateNotFoundError(
        "tfjob",
        f"template file {text!r} not found (looked in: {allowed})",
        "give the file's path relative to the DAG's folder or one of its template_searchpath folders",
    )


def template_folders(dag: Any) -> list[str]:
    """The DAG's template_searchpath, then the DAG file's folder (Airflow's lookup order)."""
    if dag is None:
        return []
    searchpath = getattr(dag, "template_searchpath", None) or []
    folders = [searchpath] if isinstance(searchpath, str) else [str(p) for p in searchpath]
    fileloc = getattr(dag, "fileloc", None)
    if fileloc:
        folders.append(str(Path(fileloc).parent))
    return folders


# --------------------------------------------------------------------------- Jinja


def compile_template(env: jinja2.Environment, text: str, path: Path) -> jinja2.Template:
    """The file's text as a template of ``env`` whose errors carry the file's name and line."""
    try:
        code = env.compile(text, filename=str(path))
    except jinja2.TemplateSyntaxError as error:
        raise jinja_error(error, path) from None
    return env.template_class.from_code(env, code, env.make_globals(None))


def render_file(env: jinja2.Environment, path: Path, render: Callable[[jinja2.Template], Any]) -> Any:
    """Render the template file at ``path`` with ``render``; Jinja errors become JobValidationError."""
    template = compile_template(env, path.read_text(encoding="utf-8"), path)
    try:
        return render(template)
    except jinja2.TemplateError as error:
        raise jinja_error(error, path) from None


def plain_environment(folders: Sequence[str | Path]) -> jinja2.Environment:
    """Jinja without Airflow: undefined names are errors, includes only from ``folders``."""
    loader = jinja2.FileSystemLoader([str(f) for f in folders])
    return jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def jinja_error(error: Exception, path: Path | None, field: str = "tfjob") -> JobValidationError:
    """A Jinja error as a JobValidationError naming ``field``, the file and line, no content quoted."""
    line = getattr(error, "lineno", None)
    if line is None and path is not None:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == str(path)]
        line = frames[-1].lineno if frames else None
    where = str(path) if path is not None else f"the {field} template"
    at = f" line {line}" if line and path is not None else ""
    message = getattr(error, "message", None) or type(error).__name__
    return JobValidationError(
        field,
        f"Jinja error in {where}{at}: {message}",
        "fix the template (a name used there must be defined, e.g. in params, and be spelt as there)",
    )


# --------------------------------------------------------------------------- YAML / JSON


def _strict_loader() -> type:
    class StrictLoader(yaml.SafeLoader):
        """SafeLoader refusing duplicate keys and alias expansion bombs."""

        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # an unhashable key: the base class reports it
                if first is not None:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {str(key)[:60]!r} (first at line {first})",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def _expanded_size(node: Any, sizes: dict[int, int]) -> int:
    """Nodes the document has once every alias is expanded (memoised: aliases share nodes)."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    sizes[id(node)] = 1  # a recursive alias counts once
    children: list[Any] = []
    if isinstance(node.value, list):
        for item in node.value:
            children.extend(item if isinstance(item, tuple) else (item,))
    total = 1
    for child in children:
        total += _expanded_size(child, sizes)
        if total > MAX_YAML_NODES:
            break
    sizes[id(node)] = total
    return total


def _yaml_problem(error: Exception, source: str) -> JobValidationError:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    at = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(error, "problem", None) or type(error).__name__
    return JobValidationError(
        "tfjob", f"{source} is not valid YAML at{at}: {problem}", "fix the YAML at that position"
    )


def parse_manifest_text(text: str, source: str, *, as_json: bool = False) -> dict[str, Any]:
    """One job mapping (any kind) from YAML or JSON text; ``source`` (a file or "the tfjob string") names it."""
    if as_json:
        try:
            data = json.loads(text, object_pairs_hook=_unique_json_keys)
        except json.JSONDecodeError as error:
            raise JobValidationError(
                "tfjob",
                f"{source} is not valid JSON at line {error.lineno}, column {error.colno}: {error.msg}",
                "fix the JSON at that position",
            ) from None
        except ValueError as error:
            raise JobValidationError("tfjob", f"{source}: {error}", "keep one of the keys") from None
    else:
        loader = _strict_loader()(text)
        try:
            node = loader.get_single_node()
            if node is not None and _expanded_size(node, {}) > MAX_YAML_NODES:
                raise JobValidationError(
                    "tfjob",
                    f"{source} expands through YAML aliases to more than {MAX_YAML_NODES} nodes",
                    "write the manifest without anchors and aliases (*name)",
                )
            data = loader.construct_document(node) if node is not None else None
        except yaml.YAMLError as error:
            raise _yaml_problem(error, source) from None
        finally:
            loader.dispose()
    if not isinstance(data, Mapping):
        raise JobValidationError(
            "tfjob",
            f"{source} holds a {type(data).__name__}, not a job object",
            "give one job mapping (apiVersion, kind, metadata, spec), e.g. a TFJob or a PyTorchJob",
        )
    return dict(data)


def _unique_json_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key[:60]!r}")
        out[key] = value
    return out


def load_template_file(
    path: Path, env: jinja2.Environment, render: Callable[[jinja2.Template], Any]
) -> dict[str, Any]:
    """Render the file at ``path`` and parse the result as a manifest."""
    rendered = render_file(env, path, render)
    if isinstance(rendered, Mapping):  # Airflow's native rendering may already give a mapping
        return dict(rendered)
    return parse_manifest_text(str(rendered), str(path), as_json=path.suffix.lower() == ".json")


# ---------------------------------------------------------------- a whole manifest


def load_manifest(
    value: Mapping[str, Any] | str,
    *,
    render: Callable[[str], str] | None = None,
    searchpath: Sequence[str | Path] = (),
    context: Mapping[str, Any] | None = None,
    allow_outside: bool = False,
) -> dict[str, Any]:
    """A full job manifest (any kind) from a dict, a YAML/JSON string, or a template file.

    A single-line string ending in .yaml/.yml/.json is a file path, relative to one of
    ``searchpath`` (the DAG's folder and template_searchpath) and resolving inside them unless
    ``allow_outside`` (:mod:`airflow_tfjob.build.templates` has the rules). It is rendered as a Jinja
    template, with ``render`` (pass Airflow's, so macros and params work) or, without it, plain
    Jinja with ``context`` as variables and undefined names as errors. Only this argument loads
    files: other strings elsewhere (``args=["--config=conf.yaml"]``) stay strings.
    """
    if isinstance(value, Mapping):
        return copy.deepcopy(dict(value))
    if not isinstance(value, str):
        raise JobValidationError(
            "tfjob",
            f"expected a mapping, a YAML string or a file path, got {type(value).__name__}",
            "pass a dict, YAML text, or a .yaml path",
        )
    if not looks_like_path(value):
        return parse_manifest_text(value, "the tfjob string")
    path = resolve_template_path(value, searchpath, allow_outside=allow_outside)
    env = plain_environment([path.parent, *searchpath])
    if render is not None:
        text = render_file(env, path, lambda t: render(path.read_text(encoding="utf-8")))
        as_json = path.suffix.lower() == ".json"
        return parse_manifest_text(str(text), str(path), as_json=as_json)
    return load_template_file(path, env, lambda t: t.render(**(context or {})))
