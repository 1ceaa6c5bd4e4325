"""A catalog of real edge device types with datasheet figures (see ``catalog.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

import yaml

__all__ = ["DeviceType", "catalog", "device_type", "speed_from_gflops"]

_NANO_GFLOPS = 472.0
_SPEED_EXPONENT = 0.34  # log(2.69/1.89) / log(1330/472): the power law through TX2 and Nano


@dataclass(frozen=True, slots=True)
class DeviceType:
    """Datasheet figures of one kind of edge device."""

    name: str
    description: str
    cpu_cores: int
    accelerator: str
    memory_mb: int
    peak_gflops: float
    speed: float
    source: str


def speed_from_gflops(peak_gflops: float) -> float:
    """Relative training speed (Nano = 1) from peak GFLOPS, by the TX2/Nano power law."""
    return float((peak_gflops / _NANO_GFLOPS) ** _SPEED_EXPONENT)


@cache
def catalog() -> dict[str, DeviceType]:
    """All device types, keyed by name."""
    text = resources.files("edgewise.cluster").joinpath("catalog.yaml").read_text()
    raw: dict[str, dict[str, object]] = yaml.safe_load(text)
    out: dict[str, DeviceType] = {}
    for name, entry in raw.items():
        gflops = float(str(entry["peak_gflops"]))
        speed = entry.get("speed")
        out[name] = DeviceType(
            name=name,
            description=str(entry["description"]),
            cpu_cores=int(str(entry["cpu_cores"])),
            accelerator=str(entry["accelerator"]),
            memory_mb=int(str(entry["memory_mb"])),
            peak_gflops=gflops,
            speed=float(str(speed)) if speed is not None else round(speed_from_gflops(gflops), 3),
            source=str(entry["source"]),
        )
    return out


def device_type(name: str) -> DeviceType:
    """The catalog entry ``name``; KeyError lists the known types."""
    types = catalog()
    if name not in types:
        raise KeyError(f"unknown device type {name!r}; known types: {', '.join(sorted(types))}")
    return types[name]
