"""The suite's CPU profiler (``python -m edgewise.devtools.cpuprof``): a usage error without
its arguments, and nothing recorded where no cgroup was given (an ordinary pytest run)."""

from __future__ import annotations

from typing import Any

import pytest

from edgewise.devtools import cpuprof


def test_without_an_output_and_a_command_it_says_how_to_call_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cpuprof.main([]) == 2
    assert cpuprof.main(["out.json", "pytest"]) == 2  # no "--" before the command
    usage = "usage: python -m edgewise.devtools.cpuprof OUT.json -- pytest"
    assert usage in capsys.readouterr().err


def test_outside_its_cgroup_the_hook_records_nothing(monkeypatch: pytest.MonkeyPatch,
                                                     request: pytest.FixtureRequest) -> None:
    monkeypatch.delenv(cpuprof.GROUP_ENV, raising=False)
    before = list(cpuprof._rows)
    hook: Any = cpuprof.pytest_runtest_protocol(request.node, None)
    next(hook)
    with pytest.raises(StopIteration):
        next(hook)
    assert cpuprof._rows == before
