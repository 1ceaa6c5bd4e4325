"""Staleness counting against scripted orders of pulls and pushes, the treatments' formulas,
and balanced synchronous steps (pure: no Ray)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from edgewise.nn.models import Warmup, epoch_lr
from edgewise.runtime.asyncapply import StaleApplier
from edgewise.runtime.balance import (
    WARMUP_FRACTION,
    balanced_steps,
    batch_warmup,
    epoch_batches,
    lr_scale,
)
from edgewise.runtime.staleness import (
    StalenessLedger,
    Treatment,
    VersionSnapshots,
    delay_compensated,
    gap_penalised,
    implicit_momentum,
)
from edgewise.runtime.trainstate import FlatState, Pushed


def _server(treatment: str) -> tuple[FlatState, torch.optim.Optimizer, StaleApplier]:
    torch.manual_seed(0)
    flat = FlatState(nn.Linear(3, 2))
    opt = torch.optim.Adam(flat.optimizer_parameters().values(), lr=0.1)
    return flat, opt, StaleApplier(Treatment(treatment), flat, opt)  # type: ignore[arg-type]


def _push(flat: FlatState, base: int) -> Pushed:
    grads = {k: torch.ones_like(v) for k, v in flat.grads.items()}
    return Pushed(grads, np.arange(4), base)


def test_staleness_follows_a_scripted_order_of_pulls_and_pushes() -> None:
    flat, _, applier = _server("none")
    held = {}  # worker -> the version it computes on
    for w in ("a", "b", "c"):  # all three pull version 0
        held[w] = applier.ledger.version
    seen = []
    for w in ("a", "b", "c", "a", "a", "b"):
        applier.treat(_push(flat, held[w]))
        seen.append(applier.ledger.values[-1])
        held[w] = applier.ledger.version  # the reply carries the new version
    # a: 0 (nothing since its pull); b: 1 (a's); c: 2 (a's, b's); a: 2 (b's, c's); a: 0;
    # b: 3 (c's and a's two)
    assert seen == [0, 1, 2, 2, 0, 3]
    assert applier.ledger.version == 6
    assert applier.ledger.mean == pytest.approx(8 / 6) and applier.ledger.max == 3


def test_a_synchronous_step_counts_one_version_and_no_staleness() -> None:
    ledger = StalenessLedger()
    assert ledger.step([0, 0, 0]) == 0
    assert ledger.step([1, 1]) == 0
    assert ledger.values == [0, 0, 0, 0, 0] and ledger.version == 2
    with pytest.raises(ValueError, match="ahead"):
        ledger.step([5])


def test_a_push_from_the_future_is_refused_and_an_epoch_resets_the_count() -> None:
    ledger = StalenessLedger()
    ledger.applied(0)
    with pytest.raises(ValueError, match="version 7"):
        ledger.applied(7)
    ledger.reset()
    assert ledger.values == [] and ledger.version == 1 and ledger.mean == 0.0


def test_the_base_version_travels_in_the_gradients_frame() -> None:
    flat = FlatState(nn.Linear(3, 2))
    pushed = flat.read_push(flat.gradients_frame(np.arange(3), "none", base=41))
    assert pushed.base == 41
    assert flat.read_push(flat.gradients_frame(np.arange(3), "none")).base == -1


def test_staleness_aware_lr_divides_the_step_by_the_staleness() -> None:
    flat, _, applier = _server("staleness-lr")
    assert applier.treat(_push(flat, 0))[1] == 1.0  # fresh
    applier.treat(_push(flat, 1))
    assert applier.treat(_push(flat, 0))[1] == pytest.approx(1 / 2)
    assert applier.treat(_push(flat, 0))[1] == pytest.approx(1 / 3)


def test_a_pushs_step_scales_with_its_batch_over_the_reference() -> None:
    """With a batch reference of 2 samples, a 4-sample push (``_push``) steps twice as far,
    times its staleness factor; the paper's loop (``none``) never scales."""
    torch.manual_seed(0)
    flat = FlatState(nn.Linear(3, 2))
    opt = torch.optim.Adam(flat.optimizer_parameters().values(), lr=0.1)
    applier = StaleApplier(Treatment("staleness-lr", batch_reference=2), flat, opt)
    assert applier.treat(_push(flat, 0))[1] == pytest.approx(4 / 2)
    applier.treat(_push(flat, 1))
    assert applier.treat(_push(flat, 0))[1] == pytest.approx(4 / 2 / 2)
    paper = StaleApplier(Treatment("none", batch_reference=2), flat, opt)
    assert paper.treat(_push(flat, paper.ledger.version))[1] == 1.0
    with pytest.raises(ValueError, match="batch_reference"):
        Treatment("staleness-lr", batch_reference=-1)


def test_momentum_compensation_lowers_adams_beta1_by_the_implicit_momentum() -> None:
    flat, opt, applier = _server("staleness-lr")
    for base in (0, 0, 0, 0, 0, 0):  # growing staleness
        applier.treat(_push(flat, base))
    beta1 = opt.param_groups[0]["betas"][0]
    assert beta1 == pytest.approx(max(0.0, 0.9 - implicit_momentum(applier.mean_staleness)))
    assert beta1 < 0.9
    flat, opt, applier = _server("none")  # the paper's loop keeps the optimiser as it is
    for base in (0, 0, 0):
        applier.treat(_push(flat, base))
    assert opt.param_groups[0]["betas"][0] == 0.9


def test_dc_asgd_and_gap_aware_use_the_weights_the_worker_computed_on() -> None:
    flat, _, applier = _server("dc-asgd")
    applier.hand_out("a")  # a computes on version 0
    with torch.no_grad():
        for key, t in flat.flats.items():
            if key.startswith("p."):
                t.add_(1.0)  # the server moved on by 1 everywhere
    applier.ledger.applied(0)
    treated, _ = applier.treat(_push(flat, 0))
    key = next(k for k in treated if k.startswith("p."))
    assert torch.all(treated[key] > 1.0)  # g + lambda * g * g * (now - then) with now > then
    g, now, then = torch.tensor([2.0]), torch.tensor([1.0]), torch.tensor([0.0])
    assert gap_penalised(g, now, then, torch.tensor([0.5])).item() == pytest.approx(2 / 3)
    ms = torch.tensor([0.0])
    out = delay_compensated(g, now, then, ms, lambda0=1.0, decay=0.0)
    assert ms.item() == 4.0 and out.item() == pytest.approx(2 + 0.5 * 4 * 1)


def test_unknown_treatment_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown staleness treatment"):
        Treatment("fastest")  # type: ignore[arg-type]


def test_balanced_steps_give_every_worker_the_same_steps_and_proportional_batches() -> None:
    shards = {"tx2": 359, "n0": 201, "n1": 200, "n2": 200}
    balanced = balanced_steps(shards, {"tx2": 128, "n0": 32, "n1": 32, "n2": 32})
    assert balanced.steps == round(960 / 224)
    rng = np.random.default_rng(0)
    for w, d in shards.items():
        parts = epoch_batches(rng.permutation(d), balanced.batch_sizes[w], balanced.steps)
        assert len(parts) == balanced.steps
        assert sorted(np.concatenate(parts)) == list(range(d))  # every sample once
        assert max(len(p) for p in parts) == balanced.batch_sizes[w] == -(-d // 4)
    assert balanced.lr_factor == pytest.approx(np.sqrt(240 / 224))


def test_the_rate_follows_the_global_batch_from_the_reference_and_a_raised_one_warms_up() -> None:
    """Deep-Edge's plan of the testbed (global 240 after balancing) against the reference
    128 of four workers of 32: Adam's rate grows by the square root, and warms up from the
    reference's rate over 5/90 of the epochs (Goyal et al.); a rate lowered does not."""
    shards = {"tx2": 359, "n0": 201, "n1": 200, "n2": 200}
    raised = balanced_steps(shards, {"tx2": 128, "n0": 32, "n1": 32, "n2": 32}, "adam", 128)
    assert raised.reference_batch == 128 and raised.global_batch == 240
    assert raised.lr_factor == pytest.approx(np.sqrt(240 / 128))
    warm = batch_warmup(raised.lr_factor, 30)
    assert warm.epochs == pytest.approx(30 * 5 / 90) == pytest.approx(30 * WARMUP_FRACTION)
    assert warm.start_factor == pytest.approx(1 / raised.lr_factor)
    # each epoch at the ramp's middle: 0.5/1.67 and 1.5/1.67 of the way, then all of it
    rates = [epoch_lr(0.003 * raised.lr_factor, "constant", e, 30, warm) for e in range(4)]
    assert rates[0] == pytest.approx(0.003 + (0.003 * raised.lr_factor - 0.003) * 0.3)
    assert rates[1] == pytest.approx(0.003 + (0.003 * raised.lr_factor - 0.003) * 0.9)
    assert rates[2] == rates[3] == pytest.approx(0.003 * raised.lr_factor)
    lowered = balanced_steps({w: 240 for w in shards}, dict.fromkeys(shards, 32), "adam", 128)
    assert lowered.lr_factor == pytest.approx(np.sqrt(120 / 128))
    assert batch_warmup(lowered.lr_factor, 30) == Warmup()
    assert batch_warmup(1.0, 30).factor(0) == 1.0
    # under a cosine schedule the warm-up multiplies the annealed rate
    assert epoch_lr(1.0, "cosine", 1, 30, warm) == pytest.approx(
        0.5 * (1 + np.cos(np.pi / 30)) * warm.factor(1))


def test_balanced_steps_never_exceed_the_smallest_shard() -> None:
    balanced = balanced_steps({"a": 1000, "b": 3}, {"a": 1, "b": 1}, "sgd")
    assert balanced.steps == 3 and balanced.batch_sizes == {"a": 334, "b": 1}
    assert lr_scale("sgd", 2, 1003 / 3) == pytest.approx(1003 / 6)
    assert lr_scale("adam", 100, 400) == pytest.approx(2.0)


def test_snapshots_keep_the_two_versions_an_overlapping_worker_may_push_on() -> None:
    """A worker that computes while its push is answered pushes on the version before its
    latest: both stay kept for it, the one before them is dropped once no one holds it."""
    snaps = VersionSnapshots()
    for version in (0, 1, 2):
        snaps.hand_out("a", version, {"p.w": torch.full((2,), float(version))})
    assert snaps.of(0) is None
    assert float(snaps.of(1)["p.w"][0]) == 1.0 and float(snaps.of(2)["p.w"][0]) == 2.0  # type: ignore[index]
    snaps.hand_out("b", 1, {"p.w": torch.zeros(2)})  # b gets version 1: kept, not re-copied
    snaps.hand_out("a", 3, {"p.w": torch.full((2,), 3.0)})
    assert snaps.of(1) is not None and snaps.of(2) is not None and snaps.of(3) is not None
    snaps.hand_out("b", 4, {"p.w": torch.full((2,), 4.0)})
    snaps.hand_out("b", 5, {"p.w": torch.full((2,), 5.0)})
    assert snaps.of(1) is None and sorted(snaps.weights) == [2, 3, 4, 5]


def test_a_reference_batch_outside_its_bounds_is_refused_naming_the_field() -> None:
    from edgewise.errors import ConfigError
    from edgewise.runtime.plan import MAX_REFERENCE_BATCH, TrainConfig

    assert TrainConfig(lr_reference_batch=MAX_REFERENCE_BATCH).lr_reference_batch == 10**6
    for bad in (-1, MAX_REFERENCE_BATCH + 1):
        with pytest.raises(ConfigError) as raised:
            TrainConfig(lr_reference_batch=bad)
        assert raised.value.field == "lr_reference_batch" and str(bad) in str(raised.value)
