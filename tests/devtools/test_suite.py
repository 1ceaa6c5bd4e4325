"""``make test``'s closing line: the counts read from pytest's JUnit files, an expected
failure told apart from a skip."""

from __future__ import annotations

from pathlib import Path

from edgewise.devtools.suite import Counts, read_counts

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="2" tests="6">
<testcase classname="a" name="passes"/>
<testcase classname="a" name="passes too"/>
<testcase classname="a" name="fails"><failure message="boom"/></testcase>
<testcase classname="a" name="errs"><error message="setup"/></testcase>
<testcase classname="a" name="skips"><skipped type="pytest.skip" message="no tool"/></testcase>
<testcase classname="a" name="known defect"><skipped type="pytest.xfail" message="issue 28"/>
</testcase></testsuite></testsuites>"""


def test_counts_tell_an_expected_failure_from_a_skip(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)

    counts = read_counts(path)

    assert counts == Counts(tests=6, failures=1, errors=1, skipped=1, xfailed=1)
    assert counts.passed == 2
    assert (counts + counts).passed == 4 and (counts + counts).xfailed == 2


def test_a_part_that_wrote_no_file_counts_nothing(tmp_path: Path) -> None:
    assert read_counts(tmp_path / "missing.xml") == Counts()
