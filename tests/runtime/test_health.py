"""Health bookkeeping without Ray: heartbeats, fault directives and the strike ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgewise.runtime.health import (
    ALL_SILENT_PERIODS,
    DEAD_AFTER_PERIODS,
    Directive,
    FaultBoard,
    HeartbeatTable,
    Member,
    StrikeLedger,
)

WORKER = Member("worker-nano-0", "worker", "nano-0")
PS = Member("ps", "parameter-server", "pi5")
AGENT = Member("agent-tx2", "agent", "tx2")


# --- HeartbeatTable ------------------------------------------------------------------------


def test_member_silent_for_more_than_one_and_a_half_periods_is_dead() -> None:
    table = HeartbeatTable(period_s=2.0)
    table.register(WORKER, now=10.0)

    dead = table.dead(now=10.0 + 1.5 * 2.0 + 0.01)

    assert [m for m, _ in dead] == [WORKER]
    assert dead[0][1] == pytest.approx(3.01)


def test_member_silent_for_exactly_the_limit_is_not_dead_yet() -> None:
    table = HeartbeatTable(period_s=2.0)
    table.register(WORKER, now=10.0)

    assert table.dead(now=10.0 + DEAD_AFTER_PERIODS * 2.0) == []


def test_member_that_beat_recently_is_not_dead() -> None:
    table = HeartbeatTable(period_s=1.0)
    table.register(WORKER, now=0.0)
    table.register(PS, now=0.0)
    table.beat(WORKER.name, now=5.0)

    dead = table.dead(now=5.5)

    assert [m for m, _ in dead] == [PS]


def test_each_member_is_judged_by_the_period_it_beats_at() -> None:
    """One monitor serves every job of a cluster, made with the first job's period: a later
    job's members, beating every 5 s, are not dead after 1 s of a 0.5-s monitor, and the
    0.5-s members beside them still are."""
    table = HeartbeatTable(period_s=0.5)
    slow = Member("worker-b-nano-1", "worker", "nano-1", period_s=5.0)
    table.register(WORKER, now=10.0)
    table.register(slow, now=10.0)
    table.beat(slow.name, now=10.9)  # someone beats: no silence shared by all

    assert [m for m, _ in table.dead(now=11.0)] == [WORKER]
    table.unregister(WORKER.name)
    assert table.dead(now=10.9 + 7.4) == []
    assert [m for m, _ in table.dead(now=10.9 + 7.6)] == [slow]


def test_next_death_is_the_first_deadline_among_the_watched_members() -> None:
    """A long poll sleeps until then: a beat only postpones a death, so nothing can die
    sooner."""
    table = HeartbeatTable(period_s=2.0)
    table.register(WORKER, now=10.0)  # dead after 13.0
    table.register(PS, now=11.0)  # dead after 14.0
    names = [WORKER.name, PS.name]

    assert table.next_death_s(10.5, names) == pytest.approx(2.5)
    table.beat(WORKER.name, now=12.0)  # now dead after 15.0: the server is first
    assert table.next_death_s(12.5, names) == pytest.approx(1.5)
    assert table.next_death_s(12.5, [WORKER.name]) == pytest.approx(2.5)
    assert table.next_death_s(20.0, names) == 0.0  # past it: check now
    assert table.next_death_s(12.5, ["not-registered"]) == float("inf")


@given(beats=st.lists(st.floats(0.0, 5.0), max_size=6), period=st.floats(0.1, 3.0))
def test_no_watched_member_is_dead_before_its_next_death(beats: list[float],
                                                         period: float) -> None:
    """The oracle is :meth:`dead` itself: just before the time next_death_s names, no
    member is dead; just after it, one is."""
    table = HeartbeatTable(period_s=period)
    table.register(WORKER, now=0.0)
    now = 0.0
    for gap in beats:
        now += gap
        table.beat(WORKER.name, now)
    wait = table.next_death_s(now, [WORKER.name])
    assert table.dead(now + wait - 1e-6) == []
    assert [m for m, _ in table.dead(now + wait + 1e-6)] == [WORKER]


def test_unregister_removes_member() -> None:
    table = HeartbeatTable(period_s=1.0)
    table.register(WORKER, now=0.0)
    table.register(PS, now=0.0)

    table.unregister(WORKER.name)
    table.unregister("never-registered")  # no error

    assert set(table.members) == {PS.name}
    assert set(table.last_beat) == {PS.name}
    assert [m for m, _ in table.dead(now=100.0)] == [PS]


def test_beat_from_unknown_member_is_ignored() -> None:
    table = HeartbeatTable(period_s=1.0)
    table.register(WORKER, now=0.0)

    table.beat("ghost", now=1.0)

    assert "ghost" not in table.last_beat
    assert "ghost" not in table.members
    assert [m.name for m, _ in table.dead(now=10.0)] == [WORKER.name]


def test_beat_after_unregister_does_not_resurrect() -> None:
    table = HeartbeatTable(period_s=1.0)
    table.register(WORKER, now=0.0)
    table.unregister(WORKER.name)

    table.beat(WORKER.name, now=1.0)

    assert table.last_beat == {}


def test_a_silence_every_member_shares_is_the_monitors_and_kills_nobody() -> None:
    """The served manager's monitor heard nobody for 1.7 s on a loaded host and struck
    four healthy devices (2026-12-02): a pause shared by all is not each member's."""
    table = HeartbeatTable(period_s=1.0)
    for member in (WORKER, PS, AGENT):
        table.register(member, now=0.0)
    for member in (WORKER, PS, AGENT):
        table.beat(member.name, now=1.0)

    assert table.dead(now=3.0) == []  # all three silent for 2 s: the monitor's pause
    table.beat(WORKER.name, now=3.2)  # beats resume; the others' clocks start again
    table.beat(WORKER.name, now=4.2)
    assert table.dead(now=4.6) == []
    dead = table.dead(now=4.8)  # PS and the agent silent 1.6 s since beats resumed
    assert sorted(m.name for m, _ in dead) == sorted([PS.name, AGENT.name])
    assert dict((m.name, s) for m, s in dead)[PS.name] == pytest.approx(3.8)


def test_a_silence_every_member_shares_past_its_bound_kills_them_all() -> None:
    table = HeartbeatTable(period_s=1.0)
    table.register(WORKER, now=0.0)
    table.register(PS, now=0.0)

    assert table.dead(now=ALL_SILENT_PERIODS - 0.1) == []
    assert {m.name for m, _ in table.dead(now=ALL_SILENT_PERIODS + 0.1)} == {WORKER.name,
                                                                            PS.name}


@given(
    period=st.floats(min_value=0.05, max_value=30.0),
    last_beat_periods=st.integers(min_value=0, max_value=20),
    offset=st.floats(min_value=0.0, max_value=1.0),
    phase=st.floats(min_value=0.0, max_value=1.0),
    companion=st.booleans(),
)
def test_crash_is_detected_within_two_periods(
    period: float, last_beat_periods: int, offset: float, phase: float, companion: bool
) -> None:
    # Prepare: the member registers at `start`, beats every period until its crash at t0
    # (its last beat); a checker polls every period / 4 at an arbitrary phase.
    start = offset * period
    t0 = start + last_beat_periods * period
    beats = [start + k * period for k in range(1, last_beat_periods + 1)]
    step = period / 4
    polls = [phase * step + k * step for k in range(int((t0 + 3 * period) / step) + 2)]
    table = HeartbeatTable(period_s=period)
    table.register(WORKER, now=start)
    if companion:  # a second member that keeps beating each period, before and after
        table.register(PS, now=start)
        beats_ps = [start + k * period for k in range(1, last_beat_periods + 4)]
    else:
        beats_ps = []

    # Execute: replay beats and polls in time order.
    detected: float | None = None
    pending = iter(beats)
    next_beat = next(pending, None)
    for now in polls:
        if now < start:
            continue
        while next_beat is not None and next_beat <= now:
            table.beat(WORKER.name, next_beat)
            next_beat = next(pending, None)
        while beats_ps and beats_ps[0] <= now:
            table.beat(PS.name, beats_ps.pop(0))
        if [m for m, _ in table.dead(now) if m == WORKER]:
            detected = now
            break

    # Assert: never reported while alive, and reported within 2 periods of the last beat.
    assert detected is not None
    assert detected > t0
    assert detected - t0 <= 2 * period


# --- FaultBoard ----------------------------------------------------------------------------


def test_stall_applies_only_to_the_stalled_device_and_until_its_time() -> None:
    board = FaultBoard()
    board.stall("nano-0", until=20.0)

    assert board.directive("nano-0", now=10.0).stall_until == 20.0
    assert board.directive("nano-1", now=10.0).stall_until == 0.0
    assert board.directive("nano-0", now=20.0).stall_until == 0.0
    assert board.directive("nano-0", now=25.0) == Directive()


def test_cut_applies_to_devices_at_either_end_while_it_lasts() -> None:
    board = FaultBoard()
    board.cut("nano-1", "nano-0", until=30.0)

    at_a = board.directive("nano-0", now=10.0)
    at_b = board.directive("nano-1", now=10.0)
    elsewhere = board.directive("pi5", now=10.0)
    after = board.directive("nano-0", now=30.0)

    assert at_a.cut_links == (("nano-0", "nano-1"),)
    assert at_b.cut_links == (("nano-0", "nano-1"),)
    assert elsewhere.cut_links == ()
    assert after.cut_links == ()


def test_several_cuts_are_reported_to_a_shared_device() -> None:
    board = FaultBoard()
    board.cut("pi5", "nano-0", until=30.0)
    board.cut("nano-1", "pi5", until=15.0)

    early = board.directive("pi5", now=10.0)
    late = board.directive("pi5", now=20.0)

    assert sorted(early.cut_links) == [("nano-0", "pi5"), ("nano-1", "pi5")]
    assert late.cut_links == (("nano-0", "pi5"),)


def test_clear_removes_every_fault() -> None:
    board = FaultBoard()
    board.stall("nano-0", until=100.0)
    board.cut("nano-0", "nano-1", until=100.0)

    board.clear()

    assert board.directive("nano-0", now=1.0) == Directive()
    assert board.directive("nano-1", now=1.0) == Directive()


# --- Directive -----------------------------------------------------------------------------

_names = st.text(alphabet="abcdefghij-0123456789", min_size=1, max_size=8)


@given(
    stall=st.floats(min_value=0, max_value=1e9, allow_nan=False),
    cuts=st.lists(st.tuples(_names, _names), max_size=5).map(tuple),
)
def test_directive_json_round_trip(stall: float, cuts: tuple[tuple[str, str], ...]) -> None:
    directive = Directive(stall, cuts)

    wire = json.loads(json.dumps(directive.to_json()))
    back = Directive.from_json(wire)

    assert back == directive


def test_directive_from_json_defaults_for_missing_or_malformed_fields() -> None:
    assert Directive.from_json({}) == Directive()
    assert Directive.from_json({"stall_until": "soon", "cut_links": "none"}) == Directive()
    assert Directive.from_json({"stall_until": 3}) == Directive(3.0, ())


# --- StrikeLedger --------------------------------------------------------------------------


def test_strikes_count_per_device() -> None:
    ledger = StrikeLedger(None)

    counts = [ledger.strike("nano-0"), ledger.strike("nano-0"), ledger.strike("nano-1")]

    assert counts == [1, 2, 1]
    assert ledger.counts == {"nano-0": 2, "nano-1": 1}


def test_struck_out_at_the_limit_of_three() -> None:
    ledger = StrikeLedger(None)
    for _ in range(2):
        ledger.strike("nano-0")
    ledger.strike("nano-1")

    before = ledger.struck_out()
    ledger.strike("nano-0")
    after = ledger.struck_out()

    assert ledger.limit == 3
    assert before == frozenset()
    assert after == frozenset({"nano-0"})
    assert ledger.struck_out(["nano-1", "pi5"]) == frozenset()
    assert ledger.struck_out(["nano-0", "pi5"]) == frozenset({"nano-0"})


def test_strikes_are_persisted_and_reloaded(tmp_path: Path) -> None:
    path = tmp_path / "state" / "strikes.json"
    ledger = StrikeLedger(path)
    for device in ("nano-0", "nano-0", "nano-0", "nano-1"):
        ledger.strike(device)

    reloaded = StrikeLedger(path)

    assert json.loads(path.read_text()) == {"nano-0": 3, "nano-1": 1}
    assert reloaded.counts == {"nano-0": 3, "nano-1": 1}
    assert reloaded.struck_out() == frozenset({"nano-0"})
    assert reloaded.strike("nano-1") == 2


def test_strikes_are_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Prepare: a ledger on disk, then a write that dies half-way.
    path = tmp_path / "strikes.json"
    StrikeLedger(path).strike("nano-0")

    def broken_dump(obj: object, fh: object, **kwargs: object) -> None:
        fh.write('{"nano-0": ')  # type: ignore[attr-defined]
        raise OSError("disk full")

    monkeypatch.setattr(json, "dump", broken_dump)

    # Execute
    with pytest.raises(OSError, match="disk full"):
        StrikeLedger(path).strike("nano-0")
    monkeypatch.undo()

    # Assert: the file on disk is still the last complete ledger.
    assert json.loads(path.read_text()) == {"nano-0": 1}
    assert StrikeLedger(path).counts == {"nano-0": 1}


def test_successful_write_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / "strikes.json"
    ledger = StrikeLedger(path)

    ledger.strike("nano-0")
    ledger.strike("nano-1")

    assert [p.name for p in tmp_path.iterdir()] == ["strikes.json"]


def test_no_file_when_path_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ledger = StrikeLedger(None)

    ledger.strike("nano-0")

    assert list(tmp_path.iterdir()) == []
    assert ledger.counts == {"nano-0": 1}


def test_beats_keep_their_cadence_whatever_the_replies_take() -> None:
    """Beats one period apart from the first, however long each reply took (the monitor
    sees one period between beats, not a period plus a round trip); a late beat goes at
    once and the cadence restarts there; a stall is waited out, then the beats resume."""
    from edgewise.runtime.heartbeat import next_beat

    sent, due, now = [], 0.0, 0.0
    for reply_s in (0.3, 0.05, 0.6, 0.0):  # each reply's round trip
        sent.append(now)
        now += reply_s
        wait, due = next_beat(now, due, 1.0)
        now += wait
    assert sent == [0.0, 1.0, 2.0, 3.0]

    wait, due = next_beat(now=5.5, due=3.0, period_s=1.0)  # the reply came 2.5 s late
    assert (wait, due) == (0.0, 5.5)
    assert next_beat(now=5.7, due=5.5, period_s=1.0) == pytest.approx((0.8, 6.5))
    assert next_beat(now=7.0, due=6.5, period_s=1.0, stalled_s=4.0) == (4.0, 11.0)
