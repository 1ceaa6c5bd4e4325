"""Where the suite's CPU goes: each test's CPU-seconds, counted for every process it started.

A pytest plugin. Run pytest inside a cgroup v1 ``cpuacct`` group of its own; the plugin
reads the group's ``cpuacct.usage`` before and after each test (setup, call and teardown),
which counts every descendant, the Ray daemons and workers, the managers, the browser and
processes that already ended. Tests must run one at a time (no ``-n``), or they are charged
for each other. Processes that move to cgroups of their own (a testbed's nodes) leave the
group, so for the testbed's tests read the host's total instead::

    python -m edgewise.devtools.cpuprof OUT.json -- pytest -p no:cacheprovider tests/runtime

writes one row per test (``id``, ``cpu_s``, ``wall_s``) to OUT.json as it goes and prints
the group's total CPU and wall time at the end (root; cgroup v1 with ``cpuacct``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["main", "pytest_runtest_protocol"]

ROOT = Path("/sys/fs/cgroup/cpuacct")
GROUP_ENV, OUT_ENV = "EDGEWISE_CPUPROF_GROUP", "EDGEWISE_CPUPROF_OUT"
_rows: list[dict[str, Any]] = []


def _usage_s(group: str) -> float:
    return int((ROOT / group / "cpuacct.usage").read_text()) / 1e9


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item,
                            nextitem: pytest.Item | None) -> Generator[None, None, None]:
    group, out = os.environ.get(GROUP_ENV), os.environ.get(OUT_ENV)
    if not group or not out:
        yield
        return
    cpu_s, started = _usage_s(group), time.monotonic()
    yield
    _rows.append({"id": item.nodeid, "cpu_s": round(_usage_s(group) - cpu_s, 3),
                  "wall_s": round(time.monotonic() - started, 3)})
    Path(out).write_text(json.dumps(_rows))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m edgewise.devtools.cpuprof OUT.json -- pytest [ARGS...]",
              file=sys.stderr)
        return 2
    out, command = Path(args[0]).resolve(), args[2:]
    if command[0] == "pytest":
        command = [sys.executable, "-m", "pytest", *command[1:]]
    group = f"edgewise-cpuprof-{os.getpid()}"
    (ROOT / group).mkdir()
    (ROOT / group / "cgroup.procs").write_text(str(os.getpid()))
    env = os.environ | {GROUP_ENV: group, OUT_ENV: str(out)}
    started = time.monotonic()
    rc = subprocess.call([*command, "-p", "edgewise.devtools.cpuprof"], env=env)
    print(f"cpuprof: {_usage_s(group):.1f} CPU-s in {time.monotonic() - started:.0f} s wall; "
          f"per test in {out}", flush=True)
    (ROOT / "cgroup.procs").write_text(str(os.getpid()))
    with contextlib.suppress(OSError):  # a process of the run may outlive it
        (ROOT / group).rmdir()
    return rc


if __name__ == "__main__":
    sys.exit(main())
