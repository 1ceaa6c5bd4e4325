"""The one benchmark kit: figures, a separate timings section, labels, progress and plots."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgewise.bench import BenchSpec, run_bench
from edgewise.cli import bench as bench_cli
from tests.bench.fake_parts import SPEC


def test_figures_keep_their_keys_and_wall_clock_goes_to_timings() -> None:
    figures = run_bench(SPEC, seed=3, quick=True)

    assert figures["total"] == sum(range(4)) and figures["seed"] == 3 and figures["quick"]
    assert figures["real_accuracy"] == 0.9
    assert set(figures["timings"]) == {"decision_seconds", "throughput_per_s", "bench_seconds"}
    assert "throughput_per_s" not in figures  # a wall-clock figure never mixes with results


def test_contract_timings_are_copied_to_the_top_level_and_labelled() -> None:
    figures = run_bench(SPEC)

    assert figures["decision_seconds"] == figures["timings"]["decision_seconds"]
    assert "wall-clock" in figures["labels"]["decision_seconds"]
    assert figures["labels"]["real_accuracy"] == "emulator vs its own formula"


def test_no_real_skips_the_real_part() -> None:
    figures = run_bench(SPEC, include_real=False)

    assert "real_accuracy" not in figures and "throughput_per_s" not in figures["timings"]


def test_a_spec_with_only_a_real_part_runs_it_even_without_real() -> None:
    only_real = dataclasses.replace(SPEC, simulated=None, plots=None)

    figures = run_bench(only_real, include_real=False)

    assert figures["real_accuracy"] == 0.9


def test_a_spec_needs_some_part() -> None:
    with pytest.raises(ValueError):
        BenchSpec(name="empty", title="", simulated=None)


def test_progress_rises_from_zero_to_one_and_the_parts_share_the_bar() -> None:
    seen: list[tuple[str, float]] = []

    run_bench(SPEC, options={"steps": 10}, progress=lambda m, f: seen.append((m, f)))

    fractions = [f for _, f in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    simulated = [f for m, f in seen if m.startswith("step")]
    assert max(simulated) <= 1.0 - SPEC.real_share  # the simulated part's share of the bar
    assert dict(seen)["real half"] == pytest.approx(0.75)


def test_options_take_their_defaults_unless_given() -> None:
    assert run_bench(SPEC, options={"steps": 6})["total"] == sum(range(6))
    assert run_bench(SPEC)["total"] == sum(range(4))


def test_plots_are_drawn_with_the_file_backend_into_the_folder(tmp_path: Path) -> None:
    figures = run_bench(SPEC, plots_dir=tmp_path)

    assert figures["plots"] == [str(tmp_path / "fake.png")]
    assert figures["backend"].lower() == "agg"


def test_a_part_may_not_use_the_kit_s_keys() -> None:
    clash = dataclasses.replace(SPEC, simulated="tests.bench.fake_parts:clashing", real=None)

    with pytest.raises(ValueError, match="timings"):
        run_bench(clash)


def test_the_cli_builds_a_command_from_a_spec_with_its_own_options(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(bench_cli.BENCHES, "fake", "tests.bench.fake_parts:SPEC")
    monkeypatch.setenv("EDGEWISE_STATE_DIR", str(tmp_path))

    result = CliRunner().invoke(bench_cli.app, ["fake", "--json", "--steps", "5", "--seed", "2",
                                                "--no-real"])

    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert figures["total"] == sum(range(5)) and figures["seed"] == 2
    assert "real_accuracy" not in figures
    assert Path(figures["plots"][0]).parent == tmp_path / "bench" / "fake"


def test_the_cli_refuses_an_option_outside_its_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(bench_cli.BENCHES, "fake", "tests.bench.fake_parts:SPEC")

    result = CliRunner().invoke(bench_cli.app, ["fake", "--steps", "0"])

    assert result.exit_code == 2 and "Traceback" not in result.output


def test_json_output_is_only_the_object_even_if_a_library_prints_to_fd_1() -> None:
    code = ("import sys; from edgewise.cli import bench; "
            "bench.BENCHES['banner'] = 'tests.bench.fake_parts:BANNER_SPEC'; "
            "bench.app(['banner', '--json'])")
    root = Path(__file__).resolve().parents[2]

    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, timeout=120)

    assert json.loads(done.stdout)["total"] == 1, done.stdout
    assert "banner" in done.stderr
