"""The disk cache of scikit-learn's digits and stratified splits: the same arrays as
scikit-learn's own, in the same order, and no scikit-learn import once they are stored."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from edgewise.nn.sklearn_cache import stratified_indices


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EDGEWISE_CACHE_DIR", str(tmp_path))
    return tmp_path / "sklearn"


@settings(max_examples=25)
@given(n_per_class=st.integers(4, 30), classes=st.integers(2, 5),
       fraction=st.sampled_from([0.2, 0.25, 0.5]), seed=st.integers(0, 2**31 - 1))
def test_a_split_is_scikit_learns_in_its_order_computed_and_read_back(
        n_per_class: int, classes: int, fraction: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.repeat(np.arange(classes), n_per_class)).astype(np.int64)
    ids = rng.permutation(len(labels)).astype(np.int64) + 100  # not 0..n-1, not sorted
    expected = train_test_split(ids, test_size=fraction, random_state=seed, stratify=labels)
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as env:
        env.setenv("EDGEWISE_CACHE_DIR", folder)
        for _ in range(2):  # computed, then read from the file
            train, test = stratified_indices(ids, labels, fraction, seed)
            assert np.array_equal(train, expected[0]) and np.array_equal(test, expected[1])
        assert len(list(Path(folder, "sklearn").glob("split-*.npz"))) == 1


def test_each_input_has_its_own_entry(cache: Path) -> None:
    labels = np.repeat(np.arange(3), 10).astype(np.int64)
    ids = np.arange(30, dtype=np.int64)
    first = stratified_indices(ids, labels, 0.2, seed=1)
    other_seed = stratified_indices(ids, labels, 0.2, seed=2)
    other_labels = stratified_indices(ids, labels[::-1].copy(), 0.2, seed=1)
    assert len(list(cache.glob("split-*.npz"))) == 3
    assert not np.array_equal(first[0], other_seed[0])
    assert np.array_equal(other_labels[1], train_test_split(
        ids, test_size=0.2, random_state=1, stratify=labels[::-1])[1])


def test_an_impossible_split_is_scikit_learns_error_and_stores_nothing(cache: Path) -> None:
    with pytest.raises(ValueError, match="least populated class"):
        stratified_indices(np.arange(5, dtype=np.int64), np.array([0, 0, 0, 0, 1]), 0.2, 0)
    assert not cache.exists() or not list(cache.iterdir())


def test_a_corrupt_entry_is_computed_again_and_replaced(cache: Path) -> None:
    labels = np.repeat(np.arange(2), 10).astype(np.int64)
    ids = np.arange(20, dtype=np.int64)
    expected = stratified_indices(ids, labels, 0.25, 0)
    entry, = cache.glob("split-*.npz")
    entry.write_bytes(b"not a zip")
    again = stratified_indices(ids, labels, 0.25, 0)
    assert all(np.array_equal(a, b) for a, b in zip(again, expected, strict=True))
    with np.load(entry) as stored:  # rewritten whole
        assert np.array_equal(stored["train"], expected[0])


def test_an_unwritable_cache_still_gives_the_split(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("EDGEWISE_CACHE_DIR", str(blocker))  # a file: no folder inside it
    labels = np.repeat(np.arange(2), 10).astype(np.int64)
    ids = np.arange(20, dtype=np.int64)
    found = stratified_indices(ids, labels, 0.25, 0)
    expected = train_test_split(ids, test_size=0.25, random_state=0, stratify=labels)
    assert all(np.array_equal(a, b) for a, b in zip(found, expected, strict=True))


READER = """
import json, sys
import numpy as np
from edgewise.nn.data import digits_split
from edgewise.nn.streams import stream_pools
from edgewise.nn.workload.splits import stratified_split
train, val = digits_split()
pools = stream_pools(0)
split = stratified_split(np.repeat(np.arange(3), 10), 0.2, 4)
print(json.dumps({"sklearn": "sklearn" in sys.modules, "scipy": "scipy" in sys.modules,
                  "train": train.ids.tolist(), "x": float(train.x.sum()),
                  "pools": [p.tolist() for p in pools], "split": [s.tolist() for s in split]}))
"""


def test_a_process_with_the_cache_filled_never_imports_scikit_learn(
        tmp_path: Path) -> None:
    """The first process computes with scikit-learn; the second reads the same digits,
    splits and stream pools without importing scikit-learn or SciPy."""
    env = {"EDGEWISE_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    runs = [json.loads(subprocess.run([sys.executable, "-c", READER], env=env, check=True,
                                      capture_output=True, text=True).stdout)
            for _ in range(2)]
    assert runs[0]["sklearn"] and not runs[1]["sklearn"] and not runs[1]["scipy"]
    for key in ("train", "x", "pools", "split"):
        assert runs[0][key] == runs[1][key], key
    digits = load_digits()
    order = train_test_split(np.arange(len(digits.target)), test_size=0.2, random_state=0,
                             stratify=digits.target)[0]
    assert runs[1]["train"] == np.sort(order).tolist()
    assert runs[1]["x"] == pytest.approx(float((digits.data[np.sort(order)] / 16.0).sum()))
