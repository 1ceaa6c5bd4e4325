"""`pipeline run` from the command line, as `edgewise demo`'s SEIFER part runs it: the
built-in CNN on the shipped four-Nano cluster, one stage killed mid-stream, and every
request answered once, in order, equal to the whole model."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from edgewise.cli import app


@pytest.mark.ray
def test_a_stage_killed_mid_stream_loses_and_repeats_nothing() -> None:
    result = CliRunner().invoke(app, ["pipeline", "run", "--requests", "12", "--kill-stage",
                                      "1", "--json"])

    assert result.exit_code == 0, result.output
    figures = json.loads(result.output.strip().splitlines()[-1])
    assert figures["results"] == figures["requests"] == 12
    assert figures["in_order"] is True  # ids 0..11, each delivered once
    # ``duplicates`` counts late copies the dispatcher dropped: a request already past the
    # killed stage comes back and its re-sent copy too (docs/seifer-runtime.md). How many
    # were past it is the host's timing (2 beside stress-ng, 2026-12-04); each such copy
    # belongs to a re-sent request
    assert 0 <= figures["duplicates"] <= figures["resends"]
    assert figures["restarts"] >= 1  # the killed stage came back
    assert figures["outputs_equal_to_the_model"] is True and figures["check_vacuous"] is False
