"""The walls between the rooms fail loudly: lint-imports (run by `make lint`) on a scratch copy of the
package with wrong imports added reports each of them (one run for all, each case reading its own lines);
on the tree as it is, every contract holds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package, the contracts and their custom type, importable from its own root."""
    root = tmp_path_factory.mktemp("house")
    shutil.copytree(
        ROOT / "airflow_tfjob", root / "airflow_tfjob", ignore=shutil.ignore_patterns("__pycache__")
    )
    (root / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "house_contracts.py", root / "tests" / "house_contracts.py")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    # A wide terminal, so that no module path in the report is wrapped.
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "400"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )


def add_line(root: Path, module: str, line: str) -> None:
    """Add ``line`` to ``module`` (a path under airflow_tfjob/) after its ``from __future__`` import."""
    path = root / "airflow_tfjob" / module
    original = path.read_text()
    after = "from __future__ import annotations\n"
    assert after in original
    path.write_text(original.replace(after, after + line + "\n", 1))


def test_the_tree_keeps_every_contract() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


#: A wrong import and the module it goes into, by the contract it breaks: building importing following
#: (the rooms' layers), the provider importing the local cluster, the local cluster importing a provider room.
WRONG_IMPORTS = {
    "rooms": ("build/naming.py", "follow.progress"),
    "no-local": ("follow/summary.py", "local.cluster"),
    "local-alone": ("local/yamlfile.py", "version_compat"),
}
#: The module given a load-time import of the Kubernetes client, and the one given the same import inside
#: a function: both are sources of the light-dag-parse contract, and only the first may be named by it.
AT_LOAD, INSIDE_A_FUNCTION = "operators/tfjob.py", "operators/pytorchjob.py"


@pytest.fixture(scope="module")
def broken(scratch: Path) -> str:
    """lint-imports' report on the scratch copy with every wrong import below added at once (one run of
    the contracts instead of one a case: each case reads its own lines of the report)."""
    for module, imported in WRONG_IMPORTS.values():
        add_line(scratch, module, f"import airflow_tfjob.{imported}  # noqa")
    # A room the contracts do not name, importing the local cluster.
    room = scratch / "airflow_tfjob" / "newroom"
    room.mkdir()
    (room / "__init__.py").write_text(
        '"""A room the contracts do not name."""\nimport airflow_tfjob.local.tls  # noqa\n'
    )
    add_line(scratch, AT_LOAD, "import kubernetes  # noqa")
    add_line(scratch, INSIDE_A_FUNCTION, "\n\ndef _later() -> None:\n    import kubernetes  # noqa\n")
    result = lint(scratch)
    assert result.returncode != 0, result.stdout + result.stderr
    # One line a violation, whatever the width: import-linter wraps long lines of its report.
    return " ".join(result.stdout.split())


@pytest.mark.parametrize("contract", sorted(WRONG_IMPORTS))
def test_a_wrong_import_breaks_its_contract(broken: str, contract: str) -> None:
    module, imported = WRONG_IMPORTS[contract]
    importer = module.removesuffix(".py").replace("/", ".")
    assert f"airflow_tfjob.{importer} -> airflow_tfjob.{imported}" in broken


def test_a_new_room_importing_the_local_cluster_breaks_its_contract(broken: str) -> None:
    """The contract names the provider by a wildcard: a room added later is inside the wall at once."""
    assert "airflow_tfjob.newroom -> airflow_tfjob.local.tls" in broken


def test_a_kubernetes_import_at_load_breaks_the_light_dag_parse(broken: str) -> None:
    assert "airflow_tfjob.operators.tfjob imports kubernetes at module load" in broken


def test_the_same_import_inside_a_function_keeps_the_light_dag_parse(broken: str) -> None:
    assert "airflow_tfjob.operators.pytorchjob imports kubernetes" not in broken
    # The report's line for the module given the load-time import shows the contract was checked.
    assert "What a DAG file's parse imports loads neither the Kubernetes clients nor aiohttp BROKEN" in broken
