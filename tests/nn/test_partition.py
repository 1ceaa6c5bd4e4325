"""Any traced model cut at its candidate points: the stages, run one after another, give the
whole model's output exactly, survive the trip to an actor, and refuse what a pipeline
cannot carry."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest
import ray.cloudpickle as cloudpickle
import torch
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.partition import partition_model
from edgewise.nn.workload import build_model, workload_from_dict
from edgewise.wire.state import materialize, stage_payload


class Masked(nn.Module):
    """A residual block, then attention with a mask computed from nothing but a size (an
    input-independent sub-graph: re-tracing it would turn it into a constant)."""

    def __init__(self, width: int = 8, tokens: int = 6) -> None:
        super().__init__()
        self.embed = nn.Linear(4, width)
        self.block = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 3)
        self.tokens = tokens

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3:  # Python control flow on the input: torch.fx cannot trace it
            raise ValueError("tokens must be (batch, tokens, features)")
        h = self.embed(x)
        h = h + self.block(h)
        causal = torch.ones(self.tokens, self.tokens).tril().bool()
        h = nn.functional.scaled_dot_product_attention(h, h, h, attn_mask=causal)
        out: torch.Tensor = self.head(self.norm(h).mean(dim=1))
        return out


def _shipped(stage: nn.Module) -> nn.Module:
    """The stage as a stage actor gets it: pickled structure on meta, weights as a frame."""
    skeleton, weights = stage_payload(stage)
    return materialize(cloudpickle.loads(cloudpickle.dumps(skeleton)), weights)


def _every_split(model: nn.Module, x: torch.Tensor, most: int = 3) -> int:
    """Run every cut into 2..``most`` partitions through shipped stages; the count run."""
    pm = partition_model("m", model.eval(), x)
    n = pm.chain.n_segments
    assert len(pm.points) == n + 1 and pm.points[0] in pm.traced.inputs
    with torch.no_grad():
        want = model(x)
        runs = 0
        for k in range(1, most):
            for inner in combinations(range(1, n), k):
                y = x
                for stage in pm.split([0, *inner, n]):
                    y = _shipped(stage)(y)
                assert torch.equal(y, want), inner
                runs += 1
    return runs


def test_fx_and_export_traced_stages_compose_to_the_model_exactly() -> None:
    torch.manual_seed(0)
    plain = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.Flatten(), nn.Linear(4 * 6 * 6, 5))
    assert _every_split(plain, torch.randn(1, 3, 6, 6)) == 4 + 6  # 5 segments
    assert _every_split(Masked(), torch.randn(1, 6, 4)) >= 3
    assert partition_model("masked", Masked(), torch.randn(1, 6, 4)).traced.tracer == "export"


def test_transformers_model_from_a_workload_splits_exactly() -> None:
    workload = workload_from_dict({
        "model": "hf:ViTConfig", "data": None, "task": {"input_shape": [3, 16, 16], "classes": 3},
        "model_args": {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
                       "intermediate_size": 32, "patch_size": 8}})
    model = build_model(workload).eval()
    x = torch.randn(1, 3, 16, 16)
    pm = partition_model("vit", model, x)
    assert pm.traced.tracer == "export" and pm.chain.n_segments >= 3
    n = pm.chain.n_segments
    y = x
    with torch.no_grad():
        for stage in pm.split([0, 1, n // 2, n]):
            y = _shipped(stage)(y)
        assert torch.equal(y, model(x))


def test_exported_program_loaded_from_a_file_splits_exactly(tmp_path: Path) -> None:
    torch.manual_seed(1)
    eager = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.ReLU(),
                          nn.Flatten(), nn.Linear(4 * 4 * 4, 2)).eval()
    x = torch.randn(1, 3, 8, 8)
    torch.export.save(torch.export.export(eager, (x,)), tmp_path / "m.pt2")
    workload = workload_from_dict({"model": f"export:{tmp_path / 'm.pt2'}", "data": None,
                                   "task": {"input_shape": [3, 8, 8]}})
    loaded = build_model(workload)
    pm = partition_model("exported", loaded, x)
    n = pm.chain.n_segments
    y = x
    with torch.no_grad():
        for stage in pm.split([0, 2, 4, n]):
            y = _shipped(stage)(y)
        assert torch.allclose(y, eager(x), atol=1e-6)


class TwoOut(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + 1, x * 2


class TwoIn(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


def test_what_a_pipeline_cannot_carry_is_refused() -> None:
    with pytest.raises(ConfigError, match="returns several tensors"):
        partition_model("two-out", TwoOut(), torch.zeros(1, 2))
    with pytest.raises(ConfigError, match="takes 2 inputs"):
        partition_model("two-in", TwoIn(), (torch.zeros(1, 2), torch.zeros(1, 2)))
    pm = partition_model("seq", nn.Sequential(nn.Linear(2, 2), nn.ReLU()), torch.zeros(1, 2))
    for bad in ([0, 1], [0, 2, 1, 2], [1, 2]):
        with pytest.raises(ConfigError, match="cuts"):
            pm.split(bad)


class Chunky(nn.Module):
    """A cut vertex whose value is a tuple (``chunk``): no frame can carry it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = torch.relu(x).chunk(2, dim=1)
        return a * b


def test_points_are_single_tensors() -> None:
    pm = partition_model("chunky", Chunky(), torch.randn(1, 4))
    nodes = {n.name: n for n in pm.traced.module.graph.nodes}
    assert "chunk" not in pm.points and "relu" in pm.points
    assert all(nodes[p].op != "output" for p in pm.points)
