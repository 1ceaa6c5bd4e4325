"""The chain cache: a second read does not trace, a corrupt entry is traced again."""

from __future__ import annotations

from pathlib import Path

import pytest

import edgewise.nn.zoo as zoo
from edgewise.nn.chain_cache import cache_key, cached_chain


def test_cache_round_trip_and_corrupt_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    traced = cached_chain("nasnet-toy", directory=tmp_path)
    entry = tmp_path / f"{cache_key('nasnet-toy', 4)}.json"
    assert entry.is_file()

    def no_tracing(name: str, dtype_bytes: int = 4) -> None:
        raise AssertionError("traced although cached")

    monkeypatch.setattr(zoo, "chain", no_tracing)
    assert cached_chain("nasnet-toy", directory=tmp_path) == traced
    monkeypatch.undo()
    entry.write_text("{not json")
    assert cached_chain("nasnet-toy", directory=tmp_path) == traced


def test_key_depends_on_model_and_dtype() -> None:
    assert len({cache_key("vgg-16", 4), cache_key("vgg-16", 2), cache_key("gpt2", 4)}) == 3
