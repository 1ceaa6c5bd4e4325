"""The real-run part of `edgewise bench okita`: a small scenario planned by Okita and carried
out on Ray with real digits training across migrations (the testbed of §V-A, Fig. 6)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from edgewise.sites.problem import Plan, SitesProblem
from edgewise.sites.run import SiteRunConfig, SitesRun, execute_emulated
from edgewise.sites.scenario import scenario_from_dict
from edgewise.sites.sim import plan_schedule

__all__ = ["REAL_SCENARIO", "demo_problem", "real_figures", "real_problem", "run_real"]

Progress = Callable[[str, float], None]

# Three edge cloudlets with one GPU each, so a job gets at most one worker per site and
# needs two slots; digits-b arrives while digits-a still trains. ρ_i/E_i = 4 chunks per
# worker per slot; 16 chunks per job (about 90 digits each).
REAL_SCENARIO: dict[str, Any] = {
    "horizon": 8,
    "sites": [{"name": f"edge-{c}", "gpu": 1, "cpu": 16, "mem_gb": 64, "disk_gb": 100}
              for c in "abc"],
    "bandwidth_cost": [[0.0, 0.03, 0.06], [0.03, 0.0, 0.05], [0.06, 0.05, 0.0]],
    "jobs": [
        {"name": "digits-a", "arrival": 0, "data": [8, 4, 4], "epochs": 5, "rho": 20,
         "chunk_mb": 20, "param_mb": 50, "worker": {"gpu": 1, "cpu": 4, "mem_gb": 16,
                                                    "disk_gb": 8},
         "ps": {"cpu": 4, "mem_gb": 8, "disk_gb": 5}, "latency": {"tau": 60}},
        {"name": "digits-b", "arrival": 1, "data": [4, 4, 8], "epochs": 5, "rho": 20,
         "chunk_mb": 20, "param_mb": 50, "worker": {"gpu": 1, "cpu": 4, "mem_gb": 16,
                                                    "disk_gb": 8},
         "ps": {"cpu": 4, "mem_gb": 8, "disk_gb": 5}, "latency": {"tau": 90}},
    ],
}


def real_problem(quick: bool = False) -> SitesProblem:
    """:data:`REAL_SCENARIO`; ``quick``: :func:`demo_problem` (one job, two slots)."""
    if quick:
        return demo_problem()
    return scenario_from_dict(REAL_SCENARIO, source="REAL_SCENARIO")


def demo_problem() -> SitesProblem:
    """The demo's scenario: :data:`REAL_SCENARIO` with its first job only, three epochs per
    slot. Okita runs it in two slots and moves one worker to another site in between."""
    job = {**REAL_SCENARIO["jobs"][0], "epochs": 3, "rho": 12}
    return scenario_from_dict({**REAL_SCENARIO, "jobs": [job]}, source="demo scenario")


def run_real(problem: SitesProblem, policy: str = "okita", seed: int = 0,
             progress: Progress | None = None) -> tuple[Plan, SitesRun]:
    """Plan ``problem`` with ``policy`` and carry the plan out for real."""
    plan = plan_schedule(problem, policy, seed=seed)
    done = [0]
    total = max(1, sum(e.chunks for e in plan.entries))

    def events(kind: str, data: dict[str, Any]) -> None:
        if kind == "job_slot" and progress is not None:
            record = data["record"]
            done[0] += record.chunks
            progress(f"{record.job} slot {record.slot}: accuracy {record.val_accuracy:.3f}",
                     done[0] / total)

    return plan, execute_emulated(problem, plan, config=SiteRunConfig(seed=seed), events=events)


def real_figures(seed: int = 0, quick: bool = False,
                 progress: Progress | None = None) -> dict[str, float]:
    """``real_run_final_accuracy``: the worst job's digits validation accuracy at the end;
    ``real_run_migrations``: slots in which a job's PS or workers really moved to other
    sites (restored from the checkpoint there); plus chunks and bytes moved between sites."""
    _, run = run_real(real_problem(quick), "okita", seed, progress)
    restored = [r for r in run.records if r.restored_accuracy is not None]
    return {
        "real_run_final_accuracy": min(run.final_accuracy.values()),
        "real_run_mean_accuracy": sum(run.final_accuracy.values()) / len(run.final_accuracy),
        "real_run_migrations": float(run.migrations),
        "real_run_ps_moves": float(run.ps_moves),
        "real_run_chunks_moved": float(run.chunks_moved),
        "real_run_data_bytes_moved": float(run.data_bytes_moved),
        "real_run_checkpoint_bytes_moved": float(run.checkpoint_bytes_moved),
        "real_run_restore_accuracy_gap": max(
            (abs(r.restored_accuracy - r.accuracy_before) for r in restored
             if r.restored_accuracy is not None), default=0.0),
        "real_run_seconds": run.seconds,
    }
