"""The Okita runtime on real Ray: chunks cross the emulated links, the PS migrates between
sites and training continues from the slot-end checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

from edgewise.cluster.model import Link
from edgewise.errors import ConfigError, InfeasibleError
from edgewise.sites.chunks import split_chunks
from edgewise.sites.problem import Job, JobSlot, Plan, SiteSpec, SitesProblem, Transfer
from edgewise.sites.realbench import real_problem
from edgewise.sites.run import SiteRunConfig, SitesRun, emulated_cluster, execute_emulated
from edgewise.sites.sim import plan_schedule
from edgewise.sites.sitemap import JobDevices, allocate_slot, devices_needed, site_devices
from edgewise.sites.validate import check_plan

CAP = (2.0, 16.0, 64.0, 100.0)
Q = ((0.0, 0.03), (0.03, 0.0))


def _problem() -> SitesProblem:
    sites = tuple(SiteSpec(f"edge-{c}", CAP) for c in "ab")
    job = Job("digits", 0, (6, 2), 2, (1.0, 4.0, 16.0, 8.0), (0.0, 4.0, 8.0, 5.0),
              rho=8.0, chunk_mb=20.0, param_mb=50.0)
    return SitesProblem(sites, Q, (job,), 4)


def _plan() -> Plan:
    """Slot 0: one worker and the PS at edge-a on 4 local chunks. Slot 1: the job moves to
    edge-b (PS and worker) and trains its 2 local chunks plus 2 shipped from edge-a."""
    return Plan("hand", (
        JobSlot("digits", 0, (1, 0), 0, (Transfer(0, 0, 4),)),
        JobSlot("digits", 1, (0, 1), 1, (Transfer(1, 1, 2), Transfer(0, 1, 2))),
    ), {"digits": 1})


@pytest.fixture(scope="module")
def run() -> SitesRun:
    return execute_emulated(_problem(), _plan(), config=SiteRunConfig(seed=0))


def test_the_ps_migrates_and_training_continues_from_the_checkpoint(run: SitesRun) -> None:
    first, second = run.records
    assert (first.ps_site, second.ps_site) == ("edge-a", "edge-b")
    assert second.ps_device.startswith("edge-b-") and second.migrated and second.ps_moved
    assert run.migrations == 1 and run.ps_moves == 1
    # The PS restored on edge-b holds exactly the model checkpointed at edge-a's slot end.
    assert second.restored_accuracy == pytest.approx(first.val_accuracy, abs=1e-9)
    assert second.accuracy_before == first.val_accuracy
    assert first.val_accuracy > 0.5  # trained, not a fresh model (chance is 0.1)
    assert second.val_accuracy >= first.val_accuracy
    assert run.checkpoint_bytes_moved > 10_000


def test_chunks_moved_between_sites_are_counted(run: SitesRun) -> None:
    (move,) = run.moves
    assert (move.src, move.dst, move.chunks, move.slot) == ("edge-a", "edge-b", 2, 1)
    counts = run.store_counts["edge-a"]
    assert counts["frames"] == 1 and counts["wire_bytes"] == move.wire_bytes > 0
    assert counts["edge-a-store<->edge-b-store:frames"] == 1
    assert run.store_counts["edge-b"]["frames"] == 0
    assert run.chunks_moved == 2 and run.untrained_chunks == {"digits": 0}
    # every chunk trained once: 8 chunks of the 1,437 training digits
    assert sum(r.samples for r in run.records) == 1437
    assert [r.chunks for r in run.records] == [4, 4]


def test_an_invalid_plan_is_refused_before_ray_starts() -> None:
    bad = Plan("bad", (JobSlot("digits", 0, (1, 0), 0, (Transfer(0, 0, 8),)),),
               {"digits": 0})
    with pytest.raises(InfeasibleError, match=r"\(2a\)|\(2b\)"):
        execute_emulated(_problem(), bad)


def test_site_devices_and_allocation_keep_a_job_where_it_stays() -> None:
    problem, plan = _problem(), _plan()
    cluster = emulated_cluster(problem, plan, SiteRunConfig())
    assert devices_needed(problem, plan) == [2, 2]
    sites = site_devices(cluster, problem, plan)
    assert [s.store for s in sites] == ["edge-a-store", "edge-b-store"]
    assert cluster.link("edge-a-n0", "edge-a-n1").bandwidth_mbps == 1000.0
    assert cluster.link("edge-a-n0", "edge-b-n0").bandwidth_mbps == 100.0
    stay = JobSlot("digits", 1, (1, 1), 0, ())
    got = allocate_slot([stay], sites, {"digits": JobDevices("edge-a-n1", ("edge-a-n0",))})
    assert got["digits"] == JobDevices("edge-a-n1", ("edge-a-n0", "edge-b-n0"))
    small = cluster.without(frozenset({"edge-b-n1"}))
    with pytest.raises(ConfigError, match="edge-b"):
        site_devices(small, problem, plan)
    assert isinstance(cluster.default_link, Link)


def test_chunks_partition_the_data() -> None:
    chunks = split_chunks(1437, 8, seed=3)
    joined = np.concatenate(chunks)
    assert sorted(joined.tolist()) == list(range(1437))
    assert {len(c) for c in chunks} <= {179, 180}


def _moves(plan: Plan) -> int:
    """Slots where a job's PS site or its set of worker sites differs from its last slot."""
    last: dict[str, tuple[int, frozenset[int]]] = {}
    moves = 0
    for e in plan.entries:
        now = (e.ps_site, frozenset(r for r, y in enumerate(e.workers) if y))
        moves += e.job in last and last[e.job] != now
        last[e.job] = now
    return moves


@pytest.mark.parametrize("quick", [False, True])
def test_okita_moves_the_real_scenarios_jobs_between_sites(quick: bool) -> None:
    """The real-run figures need a schedule that migrates; okita's must, on both."""
    problem = real_problem(quick)
    plan = plan_schedule(problem, "okita", seed=0)
    check_plan(problem, plan)
    assert _moves(plan) >= 1
    assert sum(e.chunks for e in plan.entries) == sum(j.total_chunks for j in problem.jobs)
