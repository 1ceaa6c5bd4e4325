"""A profile file: one CSV row per sample (columns ``schema.COLUMNS``) and a ``.keys`` side
file naming each row's place in the grid, so that a profile can be resumed."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from edgewise.errors import EdgewiseError
from edgewise.perf.schema import COLUMNS

__all__ = ["Sample", "append_sample", "keys_path", "read_samples"]


@dataclass(frozen=True, slots=True)
class Sample:
    """One profile row and where in the grid it was measured."""

    key: str
    row: dict[str, str | float | int] = field(hash=False)

    @property
    def point(self) -> str:
        return self.key.rsplit("/", 2)[0]


def keys_path(path: Path) -> Path:
    return path.with_name(path.name + ".keys")


def read_samples(path: Path, device_type: str) -> list[Sample]:
    """The samples already in ``path`` (with keys from its ``.keys`` side file)."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise EdgewiseError(f"{path}: not a profile (its columns differ from the schema)")
        rows = list(reader)
    keys_file = keys_path(path)
    keys = keys_file.read_text().split() if keys_file.exists() else []
    if len(keys) < len(rows):
        raise EdgewiseError(f"{path}: cannot resume, {keys_file} lists {len(keys)} keys for "
                            f"{len(rows)} rows; move the profile away to start afresh")
    if any(r["device_type"] != device_type for r in rows):
        raise EdgewiseError(f"{path}: holds rows of another device type than {device_type!r}")
    return [Sample(k, dict(r)) for k, r in zip(keys, rows, strict=False)]


def append_sample(path: Path, sample: Sample) -> None:
    """Append one row and its key, creating the file with its header when new."""
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow(sample.row)
    with keys_path(path).open("a") as fh:
        fh.write(sample.key + "\n")
