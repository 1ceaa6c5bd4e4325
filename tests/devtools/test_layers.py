"""The import contracts hold, and a deliberately layer-breaking import makes them fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edgewise.devtools.layers import contracts, find_pyproject
from tests.needs import require

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


@pytest.fixture(autouse=True)
def _lint_imports() -> None:
    require(LINT.exists(), "import-linter is not installed (pip install -e '.[dev]')")


def _lint(src: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([str(LINT), "--no-logo", "--no-cache", "--config",
                           str(ROOT / "pyproject.toml")], env=env, cwd=src, text=True,
                          capture_output=True, timeout=240)


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("tree") / "src"
    shutil.copytree(ROOT / "src" / "edgewise", src / "edgewise",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return src


def test_the_contracts_name_every_layer_and_the_problems() -> None:
    written = {c["id"]: c for c in contracts(find_pyproject(ROOT / "src"))}

    assert written["layers"]["layers"][0] == "cli" and written["layers"]["layers"][-1] == "errors"
    assert set(written["problems-independent"]["modules"]) == {
        f"edgewise.{p}" for p in ("update", "pipeline", "continual", "sites", "modelparallel")}


def test_a_layer_breaking_import_fails_the_lint(copy: Path) -> None:
    assert _lint(copy).returncode == 0, "the contracts must hold on the unchanged tree"
    chain = copy / "edgewise" / "nn" / "chain.py"
    chain.write_text(chain.read_text() + "\nimport edgewise.pipeline.problem  # noqa\n")

    result = _lint(copy)

    assert result.returncode != 0
    assert "edgewise.nn is not allowed to import edgewise.pipeline" in result.stdout
