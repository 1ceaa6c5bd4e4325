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
    assert figures["in_order"] is True and figures["duplicates"] == 0
    assert figures["restarts"] >= 1  # the killed stage came back
    assert figures["outputs_equal_to_the_model"] is True and figures["check_vacuous"] is False
