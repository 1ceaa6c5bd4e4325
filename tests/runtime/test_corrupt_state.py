"""State a job keeps on disk, found corrupt: a clear error naming the file, and the file left
as it was (nothing lost: the user decides what to do with it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgewise.errors import ConfigError
from edgewise.runtime.engine import latest_checkpoint
from edgewise.runtime.health import StrikeLedger
from edgewise.wire.frames import encode


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"nano-0": "many"}', ""])
def test_a_corrupt_strike_ledger_is_named_and_kept(tmp_path: Path, text: str) -> None:
    path = tmp_path / "strikes.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"strike ledger .*strikes\.json is corrupt"):
        StrikeLedger(path)
    assert path.read_text() == text


def test_a_sound_strike_ledger_is_read_back(tmp_path: Path) -> None:
    ledger = StrikeLedger(tmp_path / "strikes.json")
    ledger.strike("nano-0")
    ledger.strike("nano-0")
    assert StrikeLedger(tmp_path / "strikes.json").counts == {"nano-0": 2}


def test_the_newest_checkpoint_is_read_and_a_corrupt_one_named(tmp_path: Path) -> None:
    frame = encode({"w": np.arange(4, dtype=np.float32)}, meta={"epoch": 1})
    (tmp_path / "epoch-0000.ewt").write_bytes(frame)
    (tmp_path / "epoch-0001.ewt").write_bytes(frame)
    assert latest_checkpoint(tmp_path) == (2, frame)
    broken = frame[: len(frame) // 2]
    (tmp_path / "epoch-0002.ewt").write_bytes(broken)
    with pytest.raises(ConfigError, match=r"checkpoint .*epoch-0002\.ewt is corrupt"):
        latest_checkpoint(tmp_path)
    assert (tmp_path / "epoch-0002.ewt").read_bytes() == broken
    assert latest_checkpoint(tmp_path / "none") is None
