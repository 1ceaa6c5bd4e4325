"""Finding and removing everything a testbed made, by its name alone: namespaces
``ewtb.<name>.*``, cgroups ``edgewise/<name>/*``, Ray's files under ``/tmp/ewtb/<name>``,
and every process in any of them. Works without a record (a crashed ``up``)."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Any

from edgewise.testbed import net
from edgewise.testbed.cgroups import Cgroups

__all__ = ["leftovers", "shielded", "signals_handled", "teardown", "testbed_pids"]


def _prefix(name: str) -> str:
    return f"ewtb.{name}."


def _cgroup_root(name: str) -> str:
    return f"edgewise/{name}"


def _temp_root(name: str) -> Path:
    return Path("/tmp/ewtb") / name


def namespaces(name: str) -> list[str]:
    return [ns for ns in net.netns_list() if ns.startswith(_prefix(name))]


def node_cgroups(name: str, cgroups: Cgroups) -> list[str]:
    """Relative paths of the testbed's node cgroups that exist in any hierarchy."""
    rels: set[str] = set()
    for root in cgroups.existing(_cgroup_root(name)):
        rels |= {f"{_cgroup_root(name)}/{p.name}" for p in root.iterdir() if p.is_dir()}
    return sorted(rels)


def _cmdline_pids(marker: bytes) -> set[int]:
    """Processes whose command line mentions ``marker`` (Ray's daemons name their
    session directory, which is under the testbed's temp root)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def testbed_pids(name: str, cgroups: Cgroups) -> set[int]:
    """Every process of the testbed: in its cgroups, in its namespaces, or running from
    its Ray directories (this process excluded)."""
    pids: set[int] = set()
    for rel in node_cgroups(name, cgroups):
        pids |= cgroups.pids(rel)
    for ns in namespaces(name):
        pids |= net.netns_pids(ns)
    pids |= _cmdline_pids(str(_temp_root(name)).encode() + b"/")
    pids.discard(os.getpid())
    return pids


def _veths(name: str) -> int:
    count = 0
    for ns in namespaces(name):
        out = net.run(["ip", "-n", ns, "-o", "link", "show", "type", "veth"], check=False)
        count += len([line for line in out.splitlines() if line.strip()])
    return count


def leftovers(name: str, cgroups: Cgroups) -> dict[str, int]:
    """What of testbed ``name`` exists: namespaces, veths, cgroups, processes."""
    groups = [p for rel in [_cgroup_root(name), *node_cgroups(name, cgroups)]
              for p in cgroups.existing(rel)]
    return {"namespaces": len(namespaces(name)), "veths": _veths(name),
            "cgroups": len(groups), "processes": len(testbed_pids(name, cgroups))}


def _kill_all(name: str, cgroups: Cgroups, rounds: int = 5) -> int:
    """SIGKILL every process of the testbed until none is left; how many there were."""
    killed: set[int] = set()
    for rel in node_cgroups(name, cgroups):
        killed |= cgroups.pids(rel)
        cgroups.kill(rel)
    for _ in range(rounds):
        pids = testbed_pids(name, cgroups)
        if not pids:
            break
        killed |= pids
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
    return len(killed)


def teardown(name: str, cgroups: Cgroups) -> dict[str, int]:
    """Remove every process, namespace, cgroup and file of testbed ``name``; what was
    removed, by kind."""
    spaces = namespaces(name)
    groups = node_cgroups(name, cgroups)
    veths = _veths(name)
    processes = _kill_all(name, cgroups)
    for ns in spaces:
        net.netns_delete(ns)
    cgroups.remove_tree(_cgroup_root(name))
    for root in cgroups.roots.values():  # the shared parent, once no testbed uses it
        with suppress(OSError):
            (root / "edgewise").rmdir()
    shutil.rmtree(_temp_root(name), ignore_errors=True)
    return {"namespaces": len(spaces), "veths": veths, "cgroups": len(groups),
            "processes": processes}


@contextmanager
def signals_handled(handlers: Mapping[signal.Signals, Any]) -> Iterator[None]:
    """Install ``handlers`` (signal → handler) for the body, then restore the previous
    ones; only the main thread can, elsewhere the body just runs."""
    try:
        previous = {s: signal.signal(s, h) for s, h in handlers.items()}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def shielded() -> AbstractContextManager[None]:
    """Ignore Ctrl-C and SIGTERM in the body (a clean-up must not be cut short)."""
    return signals_handled({signal.SIGINT: signal.SIG_IGN, signal.SIGTERM: signal.SIG_IGN})
