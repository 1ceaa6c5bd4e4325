"""The policy registry: one decorator registers, the registry finds its package's modules."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from edgewise.errors import ConfigError
from edgewise.registry import Registry


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A throwaway policies package whose modules register into ``fakepol.REGISTRY``."""
    root = tmp_path / "fakepol"
    root.mkdir()
    (root / "__init__.py").write_text(textwrap.dedent('''
        from edgewise.registry import Registry
        REGISTRY = Registry("fakepol")
    '''))
    for name in ("alpha", "beta"):
        (root / f"{name}.py").write_text(textwrap.dedent(f'''
            from fakepol import REGISTRY
            @REGISTRY.register("{name}-policy")
            def policy(problem, rng):
                return "{name}"
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "fakepol"
    for mod in [m for m in sys.modules if m == "fakepol" or m.startswith("fakepol.")]:
        del sys.modules[mod]


def test_a_lookup_finds_policies_whose_modules_were_never_imported(package: str) -> None:
    registry: Registry = __import__(package).REGISTRY

    assert registry.names() == ["alpha-policy", "beta-policy"]
    assert registry.get("beta-policy")(None, None) == "beta"


def test_an_unknown_name_is_a_config_error_listing_the_known(package: str) -> None:
    registry: Registry = __import__(package).REGISTRY

    with pytest.raises(ConfigError) as info:
        registry.get("gamma")

    assert info.value.field == "policy" and "alpha-policy, beta-policy" in str(info.value)


def test_two_policies_may_not_share_a_name() -> None:
    registry: Registry = Registry("edgewise")
    registry.register("x")(lambda p, r: 1)

    with pytest.raises(ValueError, match="twice"):
        registry.register("x")(lambda p, r: 2)
