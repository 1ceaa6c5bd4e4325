"""A DNN as a chain of segments between its candidate partition points (SEIFER §3.1)."""

from __future__ import annotations

from dataclasses import dataclass

from edgewise.errors import ConfigError

__all__ = ["ModelChain"]


@dataclass(frozen=True, slots=True)
class ModelChain:
    """A DNN as a chain of segments between consecutive candidate partition points (§3.1).

    Segment ``i`` runs the layers after cut ``i - 1`` up to and including cut ``i``;
    ``output_bytes[i]`` is the size of its output η(p_i) (what crosses the cut; the last is
    the model's result), ``memory_bytes[i]`` its parameter + activation memory, ``flops[i]``
    its floating-point operations, at batch 1. ``input_bytes`` is η(p_0), the model input
    the dispatcher sends.
    """

    name: str
    input_bytes: int
    output_bytes: tuple[int, ...]
    memory_bytes: tuple[int, ...]
    flops: tuple[float, ...]
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.output_bytes)
        if n == 0 or len(self.memory_bytes) != n or len(self.flops) != n:
            raise ConfigError(f"model {self.name!r}: segment arrays must be non-empty and of "
                              "equal length", field="segments")

    @property
    def n_segments(self) -> int:
        return len(self.output_bytes)
