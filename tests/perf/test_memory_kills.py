"""Reading the kernel's OOM kills of a memory cgroup: the counter's file format (v1 and v2),
the reason a lost member is given, and a real cgroup with a 64 MB limit in which the
kernel ends a process that takes 256 MB (root and a memory controller needed); the same
cgroup's peak, limit and limit hits (a pipeline stage's memory on a testbed node)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.needs import require

from edgewise.perf.limits import MemoryKills, oom_kill_count
from edgewise.runtime.memwatch import oom_reason
from edgewise.testbed.cgroups import Cgroups, detect

V1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
V2 = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n"


def test_the_counter_is_read_from_either_version() -> None:
    assert oom_kill_count(V1) == 3
    assert oom_kill_count(V2) == 2
    assert oom_kill_count("oom_kill_disable 0\nunder_oom 0\n") is None  # kernel < 4.13


def test_a_loss_is_out_of_memory_only_when_the_count_rose() -> None:
    said = oom_reason("nano-2", MemoryKills(1, 512.0), MemoryKills(2, 512.0))
    assert said == "out of memory: the kernel ended it at nano-2's memory limit (512 MB)"
    assert oom_reason("nano-2", MemoryKills(2, 512.0), MemoryKills(2, 512.0)) is None
    assert oom_reason("nano-2", None, MemoryKills(5, None)) is None  # nothing read before
    assert oom_reason("nano-2", MemoryKills(0, None), None) is None  # nothing read after
    assert "limit (" not in str(oom_reason("x", MemoryKills(0, None), MemoryKills(1, None)))


READ = ("from edgewise.perf.limits import memory_kills; k = memory_kills(); "
        "print(k.kills, k.limit_mb)")
HOG = "b = bytearray(256 * 2**20); print('survived', len(b))"


@pytest.fixture
def small_cgroup() -> Iterator[tuple[Cgroups, str]]:
    """A memory cgroup of this test's own with a 64 MB limit (and no CPU quota)."""
    require(os.geteuid() == 0, "making a cgroup needs root")
    cgroups = detect()
    require(cgroups is not None, "this host mounts no cgroup memory controller")
    assert cgroups is not None
    rel = f"edgewise-test-oom-{os.getpid()}"
    cgroups.create(rel, memory_mb=64, quota_cores=None, period_us=100_000)
    try:
        yield cgroups, rel
    finally:
        cgroups.kill(rel)
        cgroups.remove_tree(rel)


def _run_in(cgroups: Cgroups, rel: str, code: str) -> subprocess.CompletedProcess[str]:
    procs = [str(p) for p in cgroups.procs_files(rel)]

    def join() -> None:
        for path in procs:
            Path(path).write_text(str(os.getpid()))

    return subprocess.run([sys.executable, "-c", code], preexec_fn=join,
                          capture_output=True, text=True, timeout=120)


def test_the_kernel_ending_a_process_at_the_limit_is_counted(
        small_cgroup: tuple[Cgroups, str]) -> None:
    cgroups, rel = small_cgroup
    before = _run_in(cgroups, rel, READ)
    assert before.returncode == 0, before.stderr
    assert before.stdout.split() == ["0", "64.0"]  # a new cgroup, its limit in MB

    hog = _run_in(cgroups, rel, HOG)
    assert hog.returncode == -9 and "survived" not in hog.stdout  # SIGKILL, by the kernel

    after = _run_in(cgroups, rel, READ)
    assert after.returncode == 0, after.stderr
    assert after.stdout.split() == ["1", "64.0"]


PEAK = ("from edgewise.perf.limits import memory_peak; b = b'x' * (32 * 2**20); "
        "p = memory_peak(); print(p.peak_bytes, p.limit_bytes, p.limit_hits)")


def test_a_cgroups_peak_counts_what_its_processes_took(
        small_cgroup: tuple[Cgroups, str]) -> None:
    cgroups, rel = small_cgroup
    took = _run_in(cgroups, rel, PEAK)
    assert took.returncode == 0, took.stderr
    peak, limit, hits = map(int, took.stdout.split())
    assert 32 * 2**20 <= peak <= limit == 64 * 2**20
    assert hits == 0  # it never met the limit
    assert _run_in(cgroups, rel, HOG).returncode == -9
    again = _run_in(cgroups, rel, PEAK)
    peak, limit, hits = map(int, again.stdout.split())
    assert peak == limit and hits > 0  # the hog met it



RESET = ("from edgewise.perf.limits import memory_peak, process_peak_bytes, reset_memory_peaks; "
         "b = b'x' * (40 * 2**20); before = (memory_peak().peak_bytes, process_peak_bytes()); "
         "del b; done = reset_memory_peaks(); after = memory_peak(); "
         "print(*before, done, after.peak_bytes, process_peak_bytes(), after.limit_hits)")


def test_peaks_start_afresh_for_the_next_member_of_a_process(
        small_cgroup: tuple[Cgroups, str]) -> None:
    # a vessel hosts one member after another: the next one's peaks must not be the last's
    cgroups, rel = small_cgroup
    assert _run_in(cgroups, rel, HOG).returncode == -9  # an earlier member met the limit
    ran = _run_in(cgroups, rel, RESET)
    assert ran.returncode == 0, ran.stderr
    node_before, process_before, done, node_after, process_after, hits = ran.stdout.split()
    assert int(node_before) >= 40 * 2**20 and int(process_before) >= 40 * 2**20
    assert done == "True" or cgroups.version == 2  # v2's peak resets per file handle only
    if done == "True":
        assert int(node_after) < 40 * 2**20 and hits == "0"
    assert int(process_after) < 40 * 2**20
