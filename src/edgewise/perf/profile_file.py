"""A profile file: one CSV row per sample (columns ``schema.PROFILE_COLUMNS``, or
``schema.COLUMNS`` in a profile recorded before the quality columns) and a ``.keys`` side
file naming each row's place in the grid, so that a profile can be resumed."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from edgewise.errors import EdgewiseError
from edgewise.perf.schema import COLUMNS, PROFILE_COLUMNS

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


def _header(path: Path) -> tuple[str, ...]:
    with path.open(newline="") as fh:
        return tuple(next(csv.reader(fh), ()))


def read_samples(path: Path, device_type: str) -> list[Sample]:
    """The samples already in ``path`` (with keys from its ``.keys`` side file), every row
    with every column of ``PROFILE_COLUMNS``: blank where an older profile has none."""
    if not path.exists() or path.stat().st_size == 0:
        return []
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        if tuple(reader.fieldnames or ()) not in (COLUMNS, PROFILE_COLUMNS):
            raise EdgewiseError(f"{path}: not a profile (its columns differ from the schema)")
        rows = [{c: r.get(c) or "" for c in PROFILE_COLUMNS} for r in reader]
    keys_file = keys_path(path)
    keys = keys_file.read_text().split() if keys_file.exists() else []
    if len(keys) < len(rows):
        raise EdgewiseError(f"{path}: cannot resume, {keys_file} lists {len(keys)} keys for "
                            f"{len(rows)} rows; move the profile away to start afresh")
    if any(r["device_type"] != device_type for r in rows):
        raise EdgewiseError(f"{path}: holds rows of another device type than {device_type!r}")
    return [Sample(k, dict(r)) for k, r in zip(keys, rows, strict=False)]


def _upgrade(path: Path) -> None:
    """Rewrite a profile of ``COLUMNS`` with ``PROFILE_COLUMNS``, its rows' new cells blank,
    so that rows with them can be appended; the file is replaced in one rename."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    staged = path.with_name(path.name + ".upgrading")
    with staged.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=PROFILE_COLUMNS, restval="")
        writer.writeheader()
        writer.writerows(rows)
    staged.replace(path)


def append_sample(path: Path, sample: Sample) -> None:
    """Append one row and its key, creating the file with its header when new (and adding
    the quality columns to a profile recorded without them)."""
    new = not path.exists() or path.stat().st_size == 0
    if not new and _header(path) == COLUMNS:
        _upgrade(path)
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=PROFILE_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerow(sample.row)
    with keys_path(path).open("a") as fh:
        fh.write(sample.key + "\n")
