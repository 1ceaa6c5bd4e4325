"""``edgewise bench manager``: the manager under hostile load, on 127.0.0.1 only."""

from edgewise.bench import BenchOption, BenchSpec

__all__ = ["SPEC"]

SPEC = BenchSpec(
    name="manager",
    title="The manager under hostile load: server errors under bad input, half-open "
          "connections without a token, a planning flood, a too-big workload, the jobs "
          "list with 2,000 jobs, Ray's listeners, a running job under 50 clients.",
    simulated=None,
    real="edgewise.service.loadbench.run:real",
    real_share=1.0,
    options=(
        BenchOption("hold_s", 30.0, "seconds the half-open crowds are held", kind="float",
                    minimum=1.0, maximum=600.0),
        BenchOption("load_jobs", 3, "update jobs measured under the 50 clients", minimum=1,
                    maximum=10),
        BenchOption("cases", 5, "Schemathesis cases per operation and mode (valid, invalid)",
                    minimum=1, maximum=200),
        BenchOption("stored_jobs", 2000, "finished jobs in the store for the jobs page",
                    minimum=1, maximum=100_000)),
    labels={
        "running_job_slowdown_under_50_clients":
            "median over jobs of (epoch time in a loaded window) / (epoch time in the quiet "
            "windows around it); wall-clock, moves with the host's other load",
        "cheap_read_p99_ms_under_planning_flood": "wall-clock on this host",
        "planning_flood_429_seconds_max": "wall-clock on this host",
        "manager_rss_growth_mb_big_workload": "the manager process's RSS (psutil), after "
                                              "the answer and 3 s, minus before"},
)
"""``edgewise bench manager``."""
