"""The walls between the rooms fail loudly: lint-imports (run by `make lint`) on a scratch copy of the
package with one wrong import added reports that import; on the tree as it is, every contract holds."""

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


def lint_with_line(root: Path, module: str, line: str) -> subprocess.CompletedProcess[str]:
    """lint-imports on ``root`` with ``line`` added to ``module`` (a path under airflow_tfjob/) after its
    ``from __future__`` import, the module put back as it was afterwards."""
    path = root / "airflow_tfjob" / module
    original = path.read_text()
    after = "from __future__ import annotations\n"
    assert after in original
    path.write_text(original.replace(after, after + line + "\n", 1))
    try:
        return lint(root)
    finally:
        path.write_text(original)


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


@pytest.mark.parametrize("contract", sorted(WRONG_IMPORTS))
def test_a_wrong_import_breaks_its_contract(scratch: Path, contract: str) -> None:
    module, imported = WRONG_IMPORTS[contract]
    result = lint_with_line(scratch, module, f"import airflow_tfjob.{imported}  # noqa")
    assert result.returncode != 0
    importer = module.removesuffix(".py").replace("/", ".")
    assert f"airflow_tfjob.{importer} -> airflow_tfjob.{imported}" in result.stdout


def test_a_new_room_importing_the_local_cluster_breaks_its_contract(scratch: Path) -> None:
    """The contract names the provider by a wildcard: a room added later is inside the wall at once."""
    room = scratch / "airflow_tfjob" / "newroom"
    room.mkdir()
    init = '"""A room the contracts do not name."""\nimport airflow_tfjob.local.tls  # noqa\n'
    (room / "__init__.py").write_text(init)
    try:
        result = lint(scratch)
    finally:
        shutil.rmtree(room)
    assert result.returncode != 0
    assert "airflow_tfjob.newroom -> airflow_tfjob.local.tls" in result.stdout


def test_a_kubernetes_import_at_load_breaks_the_light_dag_parse(scratch: Path) -> None:
    result = lint_with_line(scratch, "operators/tfjob.py", "import kubernetes  # noqa")
    assert result.returncode != 0
    assert "airflow_tfjob.operators.tfjob imports kubernetes at module load" in result.stdout.replace(
        "\n", " "
    )


def test_the_same_import_inside_a_function_keeps_the_light_dag_parse(scratch: Path) -> None:
    later = "\n\ndef _later() -> None:\n    import kubernetes  # noqa\n"
    result = lint_with_line(scratch, "operators/tfjob.py", later)
    assert (
        "What a DAG file's parse imports loads neither the Kubernetes clients nor aiohttp KEPT"
        in " ".join(result.stdout.split())
    )
