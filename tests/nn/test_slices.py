"""Stages that hold only their own part: a small transformer of each large class built on
``meta``, its seeded weights in shards, each stage loading exactly its own tensors; the
stages composed equal the whole model."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from edgewise.errors import ConfigError
from edgewise.nn.large import LargeModel, large_spec, prepare
from edgewise.nn.slices import SliceWeights, load_slice

SMALL_VIT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 64, "image_size": 16, "patch_size": 8, "num_labels": 5}
SMALL_BERT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
              "intermediate_size": 64, "vocab_size": 200, "seq_len": 12, "num_labels": 3}


@pytest.fixture(scope="module", params=[("vit-huge", SMALL_VIT), ("bert-large", SMALL_BERT)],
                ids=["vit", "bert"])
def small(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> LargeModel:
    name, cfg = request.param
    return prepare(large_spec(name, **cfg), tmp_path_factory.mktemp(name), seed=3)


def _thirds(lm: LargeModel) -> tuple[int, ...]:
    n = lm.partitioned.chain.n_segments
    return (0, n // 3, 2 * n // 3, n)


def _stages(lm: LargeModel, cuts: tuple[int, ...]) -> list[nn.Module]:
    """Each stage as a stage actor gets it: structure pickled, then its own tensors read."""
    return [load_slice(pickle.loads(pickle.dumps(skeleton)), ref)
            for skeleton, ref in lm.payloads(cuts)]


def test_a_stage_holds_exactly_its_slice(small: LargeModel) -> None:
    whole = small.reference()
    sizes = {k: v.numel() for k, v in whole.named_parameters()}
    seen: set[str] = set()
    for (_, ref), stage in zip(small.payloads(_thirds(small)), _stages(small, _thirds(small)),
                               strict=True):
        names = {src for _, src in ref.sources if src in sizes}
        assert names and not names & seen  # every stage its own tensors, none twice
        seen |= names
        own = sum(p.numel() for p in stage.parameters())
        assert own == sum(sizes[n] for n in names) < sum(sizes.values())
    assert seen == set(sizes)  # together, the whole model


def test_stages_compose_to_the_whole_model(small: LargeModel) -> None:
    x = small.spec.example() if small.spec.is_text else torch.randn(1, 3, 16, 16)
    with torch.inference_mode():
        want = small.reference()(x)
        got = x
        for stage in _stages(small, _thirds(small)):
            got = stage(got)
    assert float((got - want).abs().max()) <= 1e-4
    assert float(want.abs().max()) > 0


def test_parameters_are_on_meta_until_a_stage_loads_them(small: LargeModel) -> None:
    skeleton, _ = small.payloads(_thirds(small))[1]
    assert all(t.is_meta for t in skeleton.state_dict().values())
    assert all(p.is_meta for p in small.partitioned.traced.tensors.values()
               if isinstance(p, nn.Parameter))


def test_a_missing_weight_is_named(small: LargeModel, tmp_path: Path) -> None:
    skeleton, ref = small.payloads(_thirds(small))[0]
    key, name = ref.sources[0]
    broken = SliceWeights(ref.index, tuple((k, n + ".gone" if k == key else n)
                                           for k, n in ref.sources), ref.local)
    with pytest.raises(ConfigError, match="gone"):
        load_slice(skeleton, broken)
    elsewhere = SliceWeights(str(tmp_path / "none.json"), ref.sources, ref.local)
    with pytest.raises(ConfigError, match="weights index"):
        load_slice(skeleton, elsewhere)
    assert name


def test_unknown_large_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="vit-large"):
        large_spec("vit-gigantic")


def test_the_scales_keep_the_published_depth_or_name_their_sibling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``medium`` keeps each model's published depth (what a 16-way split needs) at a
    narrower width, named apart from ``small`` so their weights never share a folder; an
    unknown scale names the option."""
    from edgewise.pipeline import scale_run

    made: list[Any] = []
    monkeypatch.setattr(scale_run, "prepare", lambda spec, folder, seed, micro_batch=1:
                        made.append((spec, folder, micro_batch)))
    for name, depth in (("vit-large", 24), ("vit-huge", 32), ("bert-large", 24)):
        scale_run.load_model(name, tmp_path, scale="medium")
        spec, folder, micro_batch = made[-1]
        config = spec.kwargs()
        assert config["num_hidden_layers"] == depth and config["hidden_size"] == 256
        assert spec.name == f"{name}-medium" and folder == tmp_path / f"{name}-medium"
        assert micro_batch == 1
    scale_run.load_model("vit-large", tmp_path, scale="small", micro_batch=8)
    assert made[-1][0].name == "vit-large-small" and made[-1][2] == 8
    assert made[-1][0].kwargs()["num_hidden_layers"] == 4
    scale_run.load_model("vit-large", tmp_path)
    assert made[-1][0].name == "vit-large" and made[-1][0].kwargs()["hidden_size"] == 1024
    with pytest.raises(ConfigError, match="model-scale"):
        scale_run.load_model("vit-large", tmp_path, scale="huge")
