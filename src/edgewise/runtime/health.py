"""Health bookkeeping without Ray: heartbeat table, fault directives and the strike ledger."""

from __future__ import annotations

import json
import os
import tempfile
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from edgewise.errors import ConfigError

__all__ = ["ALL_SILENT_PERIODS", "DEAD_AFTER_PERIODS", "Directive", "FaultBoard", "HeartbeatTable",
           "Member", "StrikeLedger"]

# A member is dead after 1.5 silent periods; checked every quarter period, a crash is
# detected within 1.5 + 0.25 < 2 heartbeat periods of the last beat it sent.
DEAD_AFTER_PERIODS = 1.5
ALL_SILENT_PERIODS = 5.0
"""How long every member of a table may be silent at once before they count as dead.
Members that all fall silent together point at the monitor or the host, not at each member:
in a loaded suite run (2026-12-02) the served manager's monitor heard nobody for 1.7 s, then
declared six members of four devices dead in one poll, and the job's re-plan struck four
healthy devices. A silence shared by every member is therefore forgiven for this long, and
each member's clock starts again when beats resume; a member that dies while another beats
is detected as before (within two periods). With one member there is nobody to compare
with, and its silence is its own."""


@dataclass(frozen=True, slots=True)
class Member:
    """Something that sends heartbeats: a worker, a parameter server or a device agent."""

    name: str
    kind: str
    device: str
    period_s: float | None = None
    """The period it beats at; None: the table's. Jobs on one monitor may beat at different
    periods (the monitor is the cluster's, made by the first job with that job's period)."""


@dataclass(frozen=True, slots=True)
class Directive:
    """What the control plane tells a member with its heartbeat reply."""

    stall_until: float = 0.0
    cut_links: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"stall_until": self.stall_until, "cut_links": [list(p) for p in self.cut_links]}

    @staticmethod
    def from_json(data: dict[str, object]) -> Directive:
        raw = data.get("cut_links", [])
        pairs = tuple((str(p[0]), str(p[1])) for p in raw) if isinstance(raw, list) else ()
        stall = data.get("stall_until", 0.0)
        return Directive(float(stall) if isinstance(stall, int | float) else 0.0, pairs)


@dataclass
class HeartbeatTable:
    """Last heartbeat time of every registered member, and the recent gaps between two beats
    of one member (the period actually observed on a loaded host)."""

    period_s: float
    members: dict[str, Member] = field(default_factory=dict)
    last_beat: dict[str, float] = field(default_factory=dict)
    gaps_s: deque[float] = field(default_factory=lambda: deque(maxlen=4096))
    freshest: float = float("-inf")
    """The latest beat (or registration) of any member."""
    resumed_at: float = float("-inf")
    """When beats came again after every member had been silent (ALL_SILENT_PERIODS)."""

    def _period_s(self, member: Member) -> float:
        return member.period_s or self.period_s

    def register(self, member: Member, now: float) -> None:
        self.members[member.name] = member
        self.last_beat[member.name] = now
        self._heard(now)

    def _heard(self, now: float) -> None:
        if len(self.members) > 1 and self._shared_pause(now - self.freshest):
            self.resumed_at = now
        self.freshest = max(self.freshest, now)

    def unregister(self, name: str) -> None:
        self.members.pop(name, None)
        self.last_beat.pop(name, None)

    def beat(self, name: str, now: float) -> None:
        if name in self.members:
            self.gaps_s.append(now - self.last_beat[name])
            self.last_beat[name] = now
            self._heard(now)

    def _shared_pause(self, everyone_silent_s: float) -> bool:
        longest = max(map(self._period_s, self.members.values()), default=self.period_s)
        return DEAD_AFTER_PERIODS * longest < everyone_silent_s < ALL_SILENT_PERIODS * longest

    def dead(self, now: float) -> list[tuple[Member, float]]:
        """Members silent for more than DEAD_AFTER_PERIODS periods, with their silence;
        none while every member has been silent for less than ALL_SILENT_PERIODS, and each
        member's silence counted from when beats resumed after such a pause."""
        if len(self.members) > 1 and self._shared_pause(now - self.freshest):
            return []
        return [(self.members[n], now - t) for n, t in list(self.last_beat.items())
                if n in self.members and now - max(t, self.resumed_at)
                > DEAD_AFTER_PERIODS * self._period_s(self.members[n])]

    def next_death_s(self, now: float, names: Iterable[str]) -> float:
        """Seconds until the first of ``names`` (the registered ones) could be dead if it
        stays silent: a beat only postpones that, so nothing needs checking before it."""
        due = [max(self.last_beat[n], self.resumed_at)
               + DEAD_AFTER_PERIODS * self._period_s(self.members[n])
               for n in list(names) if n in self.members and n in self.last_beat]
        return max(0.0, min(due, default=float("inf")) - now)


@dataclass
class FaultBoard:
    """Injected faults that members learn of through heartbeat replies."""

    stalled_until: dict[str, float] = field(default_factory=dict)
    cut_until: dict[frozenset[str], float] = field(default_factory=dict)

    def stall(self, device: str, until: float) -> None:
        self.stalled_until[device] = until

    def cut(self, a: str, b: str, until: float) -> None:
        self.cut_until[frozenset((a, b))] = until

    def clear(self) -> None:
        self.stalled_until.clear()
        self.cut_until.clear()

    def directive(self, device: str, now: float) -> Directive:
        stall = self.stalled_until.get(device, 0.0)
        cuts = tuple(
            tuple(sorted(pair)) for pair, until in self.cut_until.items()
            if until > now and device in pair
        )
        return Directive(stall if stall > now else 0.0, cuts)  # type: ignore[arg-type]


def _read_counts(path: Path) -> dict[str, int]:
    """The strike counts stored at ``path``; a ConfigError naming the file if it is not a
    JSON object of device names to whole numbers (the file is left as it is)."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return {str(k): int(v) for k, v in data.items()}
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"the strike ledger {path} is corrupt ({exc}); fix or remove it "
                          "(it counts each device's interruptions, Deep-Edge §IV-D)",
                          field="strikes") from None


class StrikeLedger:
    """Interruptions of update tasks per device (Deep-Edge §IV-D: three strikes and out).

    Stored as JSON at ``path`` (written atomically) so that strikes survive restarts.
    """

    def __init__(self, path: Path | None = None, limit: int = 3) -> None:
        self.path = path
        self.limit = limit
        self.counts: dict[str, int] = {}
        if path is not None and path.exists():
            self.counts = _read_counts(path)

    def strike(self, device: str) -> int:
        self.counts[device] = self.counts.get(device, 0) + 1
        self._save()
        return self.counts[device]

    def clear(self, device: str) -> int:
        """Forget ``device``'s strikes (a repaired device is back in); how many it had."""
        had = self.counts.pop(device, 0)
        self._save()
        return had

    def struck_out(self, devices: Iterable[str] | None = None) -> frozenset[str]:
        names = self.counts if devices is None else devices
        return frozenset(d for d in names if self.counts.get(d, 0) >= self.limit)

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".strikes")
        with os.fdopen(fd, "w") as fh:
            json.dump(self.counts, fh, indent=1, sort_keys=True)
        os.replace(tmp, self.path)
