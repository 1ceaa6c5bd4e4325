"""Parts of a fake benchmark for the kit's tests: deterministic figures, a recorded timing."""

from __future__ import annotations

from pathlib import Path

from edgewise.bench import BenchContext, BenchOption, BenchSpec, Figures

SEEN: list[tuple[str, float]] = []


def simulated(ctx: BenchContext) -> Figures:
    tick = ctx.ticker(ctx.option("steps"))
    for k in range(ctx.option("steps")):
        tick(f"step {k}")
    with ctx.timings.timed("decision_seconds"):
        total = sum(range(ctx.option("steps")))
    return {"total": total, "seed": ctx.seed, "quick": ctx.quick}


def real(ctx: BenchContext) -> Figures:
    ctx.progress("real half", 0.5)
    ctx.timings["throughput_per_s"] = 123.0
    return {"real_accuracy": 0.9}


def plots(figures: Figures, folder: Path) -> Figures:
    import matplotlib

    path = folder / "fake.png"
    path.write_text("png")
    return {"plots": [str(path)], "backend": matplotlib.get_backend()}


def clashing(ctx: BenchContext) -> Figures:
    return {"timings": 1}


SPEC = BenchSpec(
    name="fake", title="A fake benchmark for the kit's tests.",
    simulated="tests.bench.fake_parts:simulated", real="tests.bench.fake_parts:real",
    plots="tests.bench.fake_parts:plots",
    options=(BenchOption("steps", 4, "steps of the simulated part", minimum=1),),
    labels={"real_accuracy": "emulator vs its own formula"},
    contract_timings=("decision_seconds",), real_share=0.5)


def banner(ctx: BenchContext) -> Figures:
    """Writes to file descriptor 1 from below Python, as a C library's banner does."""
    import os

    os.write(1, b"Running a solver banner\n")
    return {"total": 1}


BANNER_SPEC = BenchSpec(name="banner", title="A bench whose library prints to fd 1.",
                        simulated="tests.bench.fake_parts:banner")
