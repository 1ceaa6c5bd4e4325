"""``make test``: the whole suite in two parts, then one closing line for both.

The testbed's tests (``tests/testbed``, ``tests/suites``) run first, in one process: under a
pytest-xdist worker one of them (a device killed under a training job) took its worker
down, while in one process all 47 pass. Everything else then runs on ``workers``
pytest-xdist workers (most tests wait on emulated devices, so two share two cores well).
The closing line counts both parts, and its seconds are the wall time of both, so that the
figure a reader (or ``../shared/acceptance/suite``) takes from it is the whole suite's.

    python -m edgewise.devtools.suite [--workers N] [PYTEST ARGS...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Counts", "main", "read_counts"]

SERIAL = ("tests/testbed", "tests/suites")


@dataclass(frozen=True, slots=True)
class Counts:
    """Outcomes of a pytest run, read from its JUnit XML."""

    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.tests + other.tests, self.failures + other.failures,
                      self.errors + other.errors, self.skipped + other.skipped)

    @property
    def passed(self) -> int:
        return self.tests - self.failures - self.errors - self.skipped


def read_counts(path: Path) -> Counts:
    """The counts of a JUnit XML file pytest wrote (nothing if it wrote none)."""
    if not path.exists():
        return Counts()
    total = Counts()
    for suite in ET.parse(path).getroot().iter("testsuite"):
        total = total + Counts(*(int(suite.get(k, 0)) for k in
                                 ("tests", "failures", "errors", "skipped")))
    return total


def _run(args: list[str], junit: Path) -> int:
    command = [sys.executable, "-m", "pytest", f"--junitxml={junit}", *args]
    print("$ " + " ".join(command[2:]), flush=True)
    return subprocess.call(command)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    known, rest = parser.parse_known_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        first, second = Path(folder) / "serial.xml", Path(folder) / "parallel.xml"
        rc_serial = _run([*SERIAL, *rest], first)
        parallel = [f"--ignore={p}" for p in SERIAL]
        if known.workers > 0:
            parallel = ["-n", str(known.workers), "--dist", "loadgroup", *parallel]
        rc_parallel = _run([*parallel, *rest], second)
        counts = read_counts(first) + read_counts(second)
    seconds = time.monotonic() - started
    failed = counts.failures + counts.errors
    print(f"suite: {counts.passed} passed, {failed} failed, {counts.skipped} skipped "
          f"in {seconds:.2f}s (both parts, wall time)", flush=True)
    return rc_serial or rc_parallel


if __name__ == "__main__":
    sys.exit(main())
