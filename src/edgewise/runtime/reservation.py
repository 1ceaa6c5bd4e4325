"""A member's device reservation held apart from its process, on an emulating instance
(:data:`~edgewise.runtime.vessel.RESERVE_APART`): a placement group of its own with the
member's device slot and memory, made when the member starts and removed when it ends.
This process's live reservations are kept here, by member token, for one Ray instance."""

from __future__ import annotations

import contextlib
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group

from edgewise.errors import EdgewiseError

__all__ = ["clear_reservations", "reservations", "reserve", "unreserve"]

_PREFIX = "ew-reserve-"


@dataclass
class _Reserved:
    lock: threading.Lock = field(default_factory=threading.Lock)
    groups: dict[str, Any] = field(default_factory=dict)
    session: str = ""


_RESERVED = _Reserved()


def _device_name(resource: str) -> str:
    """The device a ``device-mem:`` resource names, without a shared instance's tag
    (``local_instance.device_tag``)."""
    return re.sub(r"^m[0-9]+\.", "", resource.partition(":")[2])


def reserve(token: str, resources: dict[str, float], wait_s: float) -> Any:
    """A placement group holding ``resources`` (a member's device slot and memory), once
    Ray has placed it; an error naming the member and its device if it cannot within
    ``wait_s`` seconds."""
    group = placement_group([dict(resources)], strategy="STRICT_PACK", name=f"{_PREFIX}{token}")
    if not group.wait(wait_s):
        with contextlib.suppress(Exception):
            remove_placement_group(group)
        memory = next((r for r in resources if r.startswith("device-mem:")), "")
        raise EdgewiseError(
            f"{token.split('#')[0]}: no room on {_device_name(memory)} after "
            f"{wait_s:.0f} s for {resources.get(memory, 0.0):g} MB of its memory "
            "(other actors hold the rest, or the device has less)")
    session = str(ray.get_runtime_context().gcs_address)
    with _RESERVED.lock:
        if _RESERVED.session != session:  # another instance's groups went with it
            _RESERVED.groups, _RESERVED.session = {}, session
        _RESERVED.groups[token] = group
    return group


def unreserve(token: str, group: Any) -> None:
    """Give back the reservation ``group`` of the member ``token`` (None: it had none)."""
    if group is None:
        return
    with _RESERVED.lock:
        _RESERVED.groups.pop(token, None)
    with contextlib.suppress(Exception):
        remove_placement_group(group)


def reservations() -> int:
    """Reservations this process's live members hold apart from their vessels."""
    with _RESERVED.lock:
        return len(_RESERVED.groups)


def clear_reservations() -> int:
    """Give back every reservation this process's members still hold apart (what a
    finished run left behind, with its members); how many."""
    with _RESERVED.lock:
        groups, _RESERVED.groups = list(_RESERVED.groups.values()), {}
    if ray.is_initialized():
        for group in groups:
            with contextlib.suppress(Exception):
                remove_placement_group(group)
    return len(groups)
