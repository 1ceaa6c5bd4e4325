"""`python -m edgewise.devtools.layers`: print the import contracts and whether they hold.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``) and are checked by
import-linter, the same check ``make lint`` runs; this prints them first so that a newcomer
sees the layers before the verdict.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["contracts", "find_pyproject", "main"]


def find_pyproject(start: Path | None = None) -> Path:
    """The ``pyproject.toml`` of the checkout holding this module (or above ``start``)."""
    here = (start or Path(__file__)).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and "importlinter" in candidate.read_text():
            return candidate
    raise FileNotFoundError("no pyproject.toml with [tool.importlinter] above " + str(here))


def contracts(pyproject: Path) -> list[dict[str, Any]]:
    """The contracts as written in ``pyproject``."""
    config = tomllib.loads(pyproject.read_text())
    found: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return found


def _describe(contract: dict[str, Any]) -> str:
    kind = contract["type"]
    if kind == "layers":
        return "\n".join(f"      {layer}" for layer in contract["layers"])
    if kind == "independence":
        return "      " + ", ".join(contract["modules"])
    return (f"      {', '.join(contract['source_modules'])}\n"
            f"      must not import {', '.join(contract['forbidden_modules'])}")


def main(argv: list[str] | None = None) -> int:
    """Print each contract, then run import-linter on them; exit status 0 if all hold."""
    from importlinter.cli import lint_imports

    pyproject = find_pyproject(Path(argv[0]) if argv else None)
    for contract in contracts(pyproject):
        print(f"- {contract['name']} [{contract['type']}]")
        print(_describe(contract))
    result = lint_imports(config_filename=str(pyproject), no_cache=True, no_logo=True)
    print("the contracts hold" if result == 0 else "the contracts are BROKEN (see above)")
    return int(result)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
