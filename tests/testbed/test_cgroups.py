"""Cgroup detection and the files v1 and v2 get, on a fake cgroup tree (no root needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgewise.testbed.cgroups import Cgroups, detect

HYBRID = """\
tmpfs /sys/fs/cgroup tmpfs rw 0 0
cgroup {root}/cpu cgroup rw,relatime,cpu 0 0
cgroup {root}/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup {root}/memory cgroup rw,relatime,memory 0 0
cgroup {root}/freezer cgroup rw,relatime,freezer 0 0
cgroup2 {root}/unified cgroup2 rw,relatime 0 0
"""


def _mounts(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mounts"
    path.write_text(text.format(root=tmp_path))
    return path


def test_this_kind_of_hybrid_host_gets_v1_with_cpu_memory_freezer_and_accounting(
        tmp_path: Path) -> None:
    found = detect(_mounts(tmp_path, HYBRID))
    assert found is not None and found.version == 1
    assert set(found.roots) == {"cpu", "cpuacct", "memory", "freezer"}


def test_a_pure_v2_host_gets_v2_when_it_offers_cpu_and_memory(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids")
    found = detect(_mounts(tmp_path, "cgroup2 {root} cgroup2 rw 0 0\n"))
    assert found == Cgroups(2, {"unified": tmp_path})


@pytest.mark.parametrize("text", [
    "cgroup2 {root} cgroup2 rw 0 0\n",  # v2 without cpu and memory offered
    "cgroup {root}/cpu cgroup rw,cpu 0 0\ncgroup {root}/memory cgroup rw,memory 0 0\n",
    "proc /proc proc rw 0 0\n"])
def test_no_usable_cgroups_is_none(tmp_path: Path, text: str) -> None:
    (tmp_path / "cgroup.controllers").write_text("io pids")
    assert detect(_mounts(tmp_path, text)) is None


def test_v2_enables_the_controllers_down_the_tree_and_writes_limits(tmp_path: Path) -> None:
    cgroups = Cgroups(2, {"unified": tmp_path})
    cgroups.create("edgewise/tb/0", memory_mb=512, quota_cores=0.25, period_us=50_000)
    node = tmp_path / "edgewise" / "tb" / "0"
    assert (node / "memory.max").read_text() == str(512 * 2**20)
    assert (node / "cpu.max").read_text() == "12500 50000"
    for parent in (tmp_path, tmp_path / "edgewise", tmp_path / "edgewise" / "tb"):
        assert (parent / "cgroup.subtree_control").read_text() == "+cpu +memory"
    assert (tmp_path / "edgewise" / "cpu.weight").read_text() == "10000"
    cgroups.set_quota("edgewise/tb/0", None, 50_000)
    assert (node / "cpu.max").read_text() == "max 50000"
    cgroups.freeze("edgewise/tb/0", True)
    assert (node / "cgroup.freeze").read_text() == "1"


def test_v1_writes_quota_period_memory_and_the_freezer(tmp_path: Path) -> None:
    roots = {c: tmp_path / c for c in ("cpu", "memory", "freezer")}
    cgroups = Cgroups(1, roots)
    cgroups.create("edgewise/tb/1", memory_mb=4096, quota_cores=1.5, period_us=50_000)
    assert (roots["cpu"] / "edgewise/tb/1/cpu.cfs_quota_us").read_text() == "75000"
    assert (roots["cpu"] / "edgewise/tb/1/cpu.cfs_period_us").read_text() == "50000"
    assert (roots["memory"] / "edgewise/tb/1/memory.limit_in_bytes").read_text() == str(2**32)
    cgroups.freeze("edgewise/tb/1", True)
    assert (roots["freezer"] / "edgewise/tb/1/freezer.state").read_text() == "FROZEN"
    assert [p.parent.name for p in cgroups.procs_files("edgewise/tb/1")] == ["1", "1", "1"]
