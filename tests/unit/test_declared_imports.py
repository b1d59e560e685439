"""Every distribution the provider's code imports is one pyproject.toml declares.

An import that only works because another package happens to pull its distribution in (tenacity came with
Airflow) breaks for a user the day that package stops requiring it. The walk reads every module of
`airflow_tfjob/` with ast, names the distribution each absolute import comes from in this environment
(importlib.metadata's map of top-level names; for a namespace shared by several distributions,
`airflow`, the one whose files hold the imported module) and requires it among the project's
dependencies or an extra's, or among the parts of a declared meta-distribution (`apache-airflow` is
`apache-airflow-core` and `apache-airflow-task-sdk`, and ships no module of its own).
"""

from __future__ import annotations

import ast
import sys
from functools import cache
from importlib import metadata
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "airflow_tfjob"


def imported_modules(source: str) -> set[str]:
    """The absolute module paths a module's source imports, at load time or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def third_party_imports() -> dict[str, set[str]]:
    """module path -> the provider's files importing it, stdlib and the provider itself left out."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for module in imported_modules(path.read_text()):
            top = module.partition(".")[0]
            if top in sys.stdlib_module_names or top == "airflow_tfjob" or top == "__future__":
                continue
            found.setdefault(module, set()).add(str(path.relative_to(ROOT)))
    return found


@cache
def top_level_owners() -> dict[str, list[str]]:
    """importlib.metadata's map of top-level names to distributions (it reads every distribution's
    files: read once, not per import)."""
    return metadata.packages_distributions()


@cache
def files_of(distribution: str) -> frozenset[str]:
    return frozenset(str(f) for f in metadata.distribution(distribution).files or ())


def owner(module: str) -> NormalizedName | None:
    """The installed distribution the module comes from."""
    candidates = top_level_owners().get(module.partition(".")[0], [])
    if len(set(candidates)) == 1:
        return canonicalize_name(candidates[0])
    # A namespace several distributions fill: the one holding the module's own file or directory,
    # or the closest parent package holding it (`from airflow.sdk.log import x`: airflow/sdk/log.py).
    parts = module.split(".")
    while parts:
        stem = "/".join(parts)
        holders = {
            canonicalize_name(d)
            for d in set(candidates)
            if f"{stem}.py" in files_of(d) or any(f.startswith(f"{stem}/") for f in files_of(d))
        }
        if len(holders) == 1:
            return holders.pop()
        if holders:  # a namespace directory shared by several (airflow/providers): look deeper
            break
        parts.pop()
    return None


def declared() -> set[NormalizedName]:
    """The project's dependencies and extras' requirements, with the parts of the meta-distributions
    among them (a distribution that ships no module and only requires others)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    texts = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        texts += extra
    names = {canonicalize_name(Requirement(text).name) for text in texts}
    for name in list(names):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if not any(str(f).endswith(".py") for f in dist.files or ()):
            requirements = [Requirement(r) for r in dist.requires or ()]
            names |= {canonicalize_name(r.name) for r in requirements if r.marker is None}
    return names


def test_the_walk_sees_the_imports_of_every_form() -> None:
    source = (
        "import yaml\nimport urllib3.exceptions\nfrom airflow.sdk import DAG\nfrom . import sibling\n"
        "def f():\n    from tenacity import Retrying\n"
    )
    assert imported_modules(source) == {"yaml", "urllib3.exceptions", "airflow.sdk", "tenacity"}


def test_a_namespace_module_is_owned_by_the_distribution_holding_it() -> None:
    assert owner("airflow.sdk") == "apache-airflow-task-sdk"
    assert (
        owner("airflow.providers.cncf.kubernetes.hooks.kubernetes")
        == "apache-airflow-providers-cncf-kubernetes"
    )
    assert owner("yaml") == "pyyaml"


def test_every_third_party_import_is_a_declared_distribution() -> None:
    imports = third_party_imports()
    assert "tenacity" in imports and "kubernetes" in {m.partition(".")[0] for m in imports}
    allowed = declared()
    undeclared = {}
    for module, files in sorted(imports.items()):
        distribution = owner(module)
        if distribution is None or distribution not in allowed:
            undeclared[module] = (distribution, sorted(files))
    assert not undeclared, (
        "imported but not declared in pyproject.toml (dependencies or an extra), as (distribution, files):\n"
        + "\n".join(f"{module}: {found}" for module, found in undeclared.items())
    )
