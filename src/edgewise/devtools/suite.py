"""``make test``: the whole suite in two parts run side by side, then one closing line.

The testbed's tests (``tests/testbed``, ``tests/suites``) run in one process of their own:
under a pytest-xdist worker one of them (a device killed under a training job) took its
worker down, while in one process all 47 pass. They mostly wait on their namespaced Ray
nodes (about one core of the two for three minutes), so the rest of the suite runs beside
them on ``workers`` pytest-xdist workers. The testbed part's output is printed when it
ends, so that the two do not interleave. The closing line counts both parts, and its
seconds are the wall time of both, so that the figure a reader (or
``../shared/acceptance/suite``) takes from it is the whole suite's.

    python -m edgewise.devtools.suite [--workers N] [--one-by-one] [PYTEST ARGS...]
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
    xfailed: int = 0
    """Expected failures (``pytest.mark.xfail``: a known defect, named in its reason); JUnit
    files them under skipped, this count does not."""

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.tests + other.tests, self.failures + other.failures,
                      self.errors + other.errors, self.skipped + other.skipped,
                      self.xfailed + other.xfailed)

    @property
    def passed(self) -> int:
        return self.tests - self.failures - self.errors - self.skipped - self.xfailed


def read_counts(path: Path) -> Counts:
    """The counts of a JUnit XML file pytest wrote (nothing if it wrote none)."""
    if not path.exists():
        return Counts()
    total = Counts()
    for suite in ET.parse(path).getroot().iter("testsuite"):
        tests, failures, errors, skipped = (int(suite.get(k, 0)) for k in
                                            ("tests", "failures", "errors", "skipped"))
        xfailed = sum(1 for s in suite.iter("skipped") if s.get("type") == "pytest.xfail")
        total = total + Counts(tests, failures, errors, skipped - xfailed, xfailed)
    return total


def _command(args: list[str], junit: Path) -> list[str]:
    command = [sys.executable, "-m", "pytest", f"--junitxml={junit}", *args]
    print("$ " + " ".join(command[2:]), flush=True)
    return command


def _finish(process: subprocess.Popen[bytes], log: Path) -> int:
    """Wait for the part running in the background, then print its output."""
    rc = process.wait()
    sys.stdout.flush()
    sys.stdout.write(log.read_text(errors="replace"))
    sys.stdout.flush()
    return rc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--one-by-one", action="store_true",
                        help="the testbed part first, then the rest (not side by side)")
    known, rest = parser.parse_known_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        first, second = Path(folder) / "serial.xml", Path(folder) / "parallel.xml"
        log = Path(folder) / "serial.log"
        parallel = [f"--ignore={p}" for p in SERIAL]
        if known.workers > 0:
            parallel = ["-n", str(known.workers), "--dist", "loadgroup", *parallel]
        if known.one_by_one:
            rc_serial = subprocess.call(_command([*SERIAL, *rest], first))
            rc_parallel = subprocess.call(_command([*parallel, *rest], second))
        else:
            with log.open("wb") as sink:
                background = subprocess.Popen(_command([*SERIAL, *rest], first),
                                              stdout=sink, stderr=subprocess.STDOUT)
            rc_parallel = subprocess.call(_command([*parallel, *rest], second))
            rc_serial = _finish(background, log)
        counts = read_counts(first) + read_counts(second)
    seconds = time.monotonic() - started
    failed = counts.failures + counts.errors
    print(f"suite: {counts.passed} passed, {failed} failed, {counts.skipped} skipped, "
          f"{counts.xfailed} xfailed in {seconds:.2f}s (both parts, wall time)", flush=True)
    return rc_serial or rc_parallel


if __name__ == "__main__":
    sys.exit(main())
