"""The independent validator flags each of (2a)-(2g) and the cost follows Eq. 1 and (2)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import edgewise.sites
from edgewise.errors import InfeasibleError
from edgewise.sites.cost import plan_cost
from edgewise.sites.problem import JobSlot, LatencyCost, Plan, SitesProblem, Transfer
from edgewise.sites.scenario import load_scenario
from edgewise.sites.validate import check_plan, violations

EXAMPLE = Path(edgewise.sites.__file__).parent / "examples" / "small.yaml"


@pytest.fixture(scope="module")
def one_job() -> SitesProblem:
    """The example reduced to its first job (ρ/E = 10 chunks per worker and slot)."""
    problem = load_scenario(EXAMPLE)
    return replace(problem, jobs=problem.jobs[:1])


def _plan(entries: list[JobSlot], completion: int | None = 1) -> Plan:
    return Plan("hand", tuple(entries), {"resnet-cifar": completion})


def _valid() -> list[JobSlot]:
    # slot 0: 2 workers at site 0 train its 12 chunks + 8 of site 1; PS at site 0
    # slot 1: site 1 trains its other 10, site 2 its 15 (2 workers each); PS at site 2
    return [
        JobSlot("resnet-cifar", 0, (2, 0, 0), 0, (Transfer(0, 0, 12), Transfer(1, 0, 8))),
        JobSlot("resnet-cifar", 1, (0, 1, 2), 2, (Transfer(1, 1, 10), Transfer(2, 2, 15))),
    ]


def test_valid_plan_and_its_cost(one_job: SitesProblem) -> None:
    plan = _plan(_valid())
    assert violations(one_job, plan) == []
    cost = plan_cost(one_job, plan)
    job = one_job.jobs[0]
    assert cost.data_transfer == pytest.approx(0.03 * 40 * 8)           # q^{10} δ g^{10}
    assert cost.parameter_exchange == pytest.approx(0.05 * 100 * 1)      # q^{12} π y^1 s^2
    assert cost.latency == pytest.approx(job.latency(2))                 # t_i = 1, a_i = 0
    assert cost.total == pytest.approx(cost.latency + cost.bandwidth)


@pytest.mark.parametrize(("broken", "tag"), [
    (lambda e: [e[0]], "(2a)"),                                                  # data left
    (lambda e: [replace(e[0], workers=(1, 0, 0)), e[1]], "(2b)"),               # too few workers
    (lambda e: [e[0], replace(e[1], workers=(0, 0, 0))], "(2c)"),               # PS, no worker
    (lambda e: [replace(e[0], workers=(9, 0, 0)), e[1]], "(2d)"),               # 9 GPUs > 4
    (lambda e: [e[0], replace(e[1], ps_site=7)], "(2g)"),
    (lambda e: [e[0], replace(e[1], workers=(0, -1, 3))], "(2f)"),
    (lambda e: [replace(e[0], transfers=(Transfer(0, 0, 11), Transfer(1, 0, 9))),
                e[1]], "site 1 supplies 19 chunks, has 18"),                     # per site
])
def test_each_violation_is_named(one_job: SitesProblem, broken, tag: str) -> None:  # type: ignore[no-untyped-def]
    found = violations(one_job, _plan(broken(_valid())))
    assert any(tag in v for v in found), found


def test_completion_must_be_the_last_active_slot(one_job: SitesProblem) -> None:
    found = violations(one_job, _plan(_valid(), completion=0))
    assert any("(2e)" in v for v in found)
    with pytest.raises(InfeasibleError, match=r"\(2e\)"):
        check_plan(one_job, _plan(_valid(), completion=0))


def test_latency_kinds() -> None:
    assert LatencyCost("linear", 20, b=50)(3) == 110
    assert LatencyCost("piecewise", 30, tau2=300, c=4)(4) == 300
    assert LatencyCost("exponential", 40)(0) == 40
