"""Room for those who authenticate: connections that have not yet sent a request carrying
the token are capped per client address and all together, below the global connection
cap, and the oldest of them makes way for a new one (``guards.guarded_protocol`` applies
this).

Why evict the oldest rather than refuse the newest: a client holding hundreds of
half-open connections would otherwise fill the cap, and every later client, the ones with
the token too, would be refused until the header deadline freed a place. Evicting the
oldest unproven connection gives each newcomer its turn to send a request head; a client
that sends its head at once (with the token) is then past the cap before the crowd
reaches it, while a connection that only holds a place loses it to the next arrival.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

from edgewise.errors import ConfigError

__all__ = ["ConnectionLimits", "Unproven"]


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """``max_connections`` open at once (the newest refused beyond); of them at most
    ``max_unproven`` without a request that carried the token, ``max_unproven_per_address``
    from one client address (the oldest evicted beyond, once open ``grace_s``; newcomers
    refused beyond twice ``max_unproven``); a first request head due within
    ``first_head_timeout_s``, a later one (keep-alive) within ``header_timeout_s``."""

    max_connections: int = 512
    max_unproven: int = 128
    max_unproven_per_address: int = 32
    first_head_timeout_s: float = 5.0
    header_timeout_s: float = 10.0
    grace_s: float = 0.25

    def __post_init__(self) -> None:
        if not 1 <= self.max_unproven_per_address <= self.max_unproven \
                or 2 * self.max_unproven >= self.max_connections:
            raise ConfigError("need 1 <= max_unproven_per_address <= max_unproven < "
                              "max_connections / 2", field="max_unproven")
        if not 0 < self.first_head_timeout_s <= self.header_timeout_s:
            raise ConfigError("need 0 < first_head_timeout_s <= header_timeout_s",
                              field="first_head_timeout_s")


class Unproven:
    """The connections that have not proven the token yet, oldest first, overall and per
    client address. :meth:`admit` returns those a newcomer evicts (to be closed): the
    oldest beyond the caps, but only connections open for at least ``grace_s``, so that
    each had its chance to send a request head (in a burst of accepts, a connection's
    first bytes are read only after the connections accepted with it are set up). Young
    connections may exceed the caps up to ``ceiling``; beyond it the oldest goes, young or
    not. The newcomer is never the one refused: it may be a client with the token that has
    not had the time to send it (a crowd filling the ceiling within the grace refused
    such clients, issue 28)."""

    def __init__(self, total: int, per_address: int, *, grace_s: float = 0.25,
                 ceiling: int | None = None) -> None:
        if not 1 <= per_address <= total:
            raise ConfigError("need 1 <= per_address <= total", field="max_unproven")
        self.total, self.per_address, self.grace_s = total, per_address, grace_s
        self.ceiling = 2 * total if ceiling is None else ceiling
        self._all: OrderedDict[Hashable, tuple[str, float]] = OrderedDict()
        self._by: dict[str, OrderedDict[Hashable, float]] = {}

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._all

    def count(self, address: str) -> int:
        return len(self._by.get(address, ()))

    def admit(self, key: Hashable, address: str, now: float) -> list[Hashable]:
        """Count ``key`` (a new connection from ``address`` at time ``now``); the
        connections to close: the oldest of its address, then of all, beyond the caps and
        older than the grace; then the oldest of all, whatever their age, beyond the
        ceiling."""
        self._all[key] = (address, now)
        self._by.setdefault(address, OrderedDict())[key] = now
        evicted: list[Hashable] = []
        mine = self._by[address]
        while len(mine) > self.per_address and self._old(next(iter(mine.values())), now):
            evicted.append(next(iter(mine)))
            self.forget(evicted[-1])
        while len(self._all) > self.total and self._old(next(iter(self._all.values()))[1],
                                                        now):
            evicted.append(next(iter(self._all)))
            self.forget(evicted[-1])
        while len(self._all) > self.ceiling:
            evicted.append(next(iter(self._all)))
            self.forget(evicted[-1])
        return evicted

    def _old(self, since: float, now: float) -> bool:
        return now - since >= self.grace_s

    def forget(self, key: Hashable) -> None:
        """``key`` proved the token, or closed: it no longer counts."""
        found = self._all.pop(key, None)
        if found is None:
            return
        mine = self._by[found[0]]
        mine.pop(key, None)
        if not mine:
            del self._by[found[0]]

    prove = forget
