"""The estimate and the check: the must-show figures, exact costs, defaults, properties."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cardhour.core.errors import InvalidInput
from cardhour.core.money import Money, rate_usage
from cardhour.estimator import (
    Claim,
    Job,
    Mode,
    book_pricing,
    build_model,
    check,
    estimate,
    given_pricing,
    preset,
    resolve_gpu,
)
from cardhour.estimator.cost import cost_of, round_half_up
from cardhour.estimator.hardware import GPUS, MFU_CEILING, default_mfu
from cardhour.settings import load_catalog

CATALOG = load_catalog()
H100 = resolve_gpu("H100")
PRICE = given_pricing(Money.parse("1.90"), 35)


def job(model: str = "llama3-70b", tokens: int = 15 * 10**12, gpus: int = 8, **kw: object) -> Job:
    return Job(preset(model), tokens, kw.pop("gpu", H100), gpus, **kw)  # type: ignore[arg-type]


def test_405b_with_meta_s_throughput_lands_within_10_percent_of_the_card() -> None:
    """400 TFLOP/s per H100 (MFU 0.404) and goodput 0.9 on 16,384 GPUs vs 30.84M GPU-hours."""
    e = estimate(
        job("llama3.1-405b", 15_600_000_000_000, 16_384, mfu=Decimal("0.404"),
            goodput=Decimal("0.9")),
        PRICE,
    )  # fmt: skip
    assert abs(float(e.gpu_hours) / 30_840_000 - 1) < 0.10
    assert round(float(e.gpu_hours)) == 31_776_832  # the figure docs/dev/estimator.md quotes
    assert abs(e.flops_dense / 3.8e25 - 1) < 0.05
    assert e.flops == e.flops_dense + e.flops_attention


@pytest.mark.parametrize(
    ("model", "gpu_hours", "implied", "implied_dense"),
    [
        ("llama3-8b", "1.3M", "0.1978", "0.1561"),
        ("llama3-70b", "6.4M", "0.3209", "0.2786"),
        ("llama3.1-8b", "1.46M", "0.1761", "0.1390"),
        ("llama3.1-70b", "7.0M", "0.2934", "0.2547"),
    ],
)
def test_model_cards_imply_far_less_than_40_percent(
    model: str, gpu_hours: str, implied: str, implied_dense: str
) -> None:
    hours = Decimal(gpu_hours[:-1]) * 1_000_000
    c = check(job(model), Claim(gpu_hours=hours), PRICE)
    spec = preset(model)
    flops = (6 * spec.params + 12 * 32 * 0 + spec.attention_flops_per_token()) * 15 * 10**12
    exact = Fraction(flops) / (Fraction(hours) * 3600 * Fraction(Decimal("989.4e12")))
    assert c.implied_mfu == exact  # exactly the formula, no float on the way
    assert f"{float(c.implied_mfu):.4f}" == implied
    assert f"{float(c.implied_mfu_dense):.4f}" == implied_dense
    assert c.feasible and c.shortfall_x is None and c.implied_mfu < Fraction(4, 10)


def test_the_405b_card_implies_37_percent() -> None:
    """Llama 3.1 405B: 30.84M H100-hours for 15.6T tokens (docs/dev/estimator.md)."""
    c = check(job("llama3.1-405b", 15_600_000_000_000), Claim(gpu_hours=Decimal("30.84e6")), PRICE)
    assert f"{float(c.implied_mfu):.4f}" == "0.3746"
    assert f"{float(c.implied_mfu_dense):.4f}" == "0.3458"
    assert c.feasible


def test_cost_is_exact_to_the_minor_unit() -> None:
    """8 GPUs × 24 days × 24 h × 1.90 CNY = 8,755.20 CNY."""
    c = check(job(), Claim(days=Decimal(24)), PRICE)
    assert c.cost_on_demand == Money.parse("8755.20")
    assert c.gpu_hours == 8 * 24 * 24
    assert cost_of(Money.parse("1.90"), 8 * 24 * 86_400) == Money.parse("8755.20")


def test_an_impossible_claim_says_by_how_much() -> None:
    c = check(job(), Claim(days=Decimal(24)), PRICE)
    assert not c.feasible
    assert c.shortfall_x == c.implied_mfu / Fraction(MFU_CEILING)
    assert c.shortfall_x is not None and 740 < c.shortfall_x < 745
    assert c.min_gpu_seconds == Fraction(c.estimate.flops) / (
        Fraction(Decimal("989.4e12")) * Fraction(MFU_CEILING)
    )
    # a claim exactly at the ceiling is still feasible
    at = check(job(), Claim(gpu_hours=Decimal(c.min_gpu_seconds.numerator) / (
        Decimal(c.min_gpu_seconds.denominator) * 3600)), PRICE)  # fmt: skip
    assert abs(at.implied_mfu - Fraction(MFU_CEILING)) < Fraction(1, 10**20)


def test_claim_needs_exactly_one_figure() -> None:
    for claim in ({}, {"days": Decimal(1), "gpu_hours": Decimal(1)}):
        with pytest.raises(InvalidInput, match="exactly one"):
            Claim(**claim)
    with pytest.raises(InvalidInput, match="days"):
        Claim(days=Decimal(-1))


def test_the_estimate_rounds_the_wall_clock_up_to_the_second() -> None:
    e = estimate(job(gpus=7), PRICE)
    exact = Fraction(e.flops) / (Fraction(e.achieved_flops) * Fraction(e.goodput) * 7)
    assert e.wall_seconds - 1 < exact <= e.wall_seconds
    assert e.gpu_seconds == 7 * e.wall_seconds
    assert e.cost_on_demand == rate_usage(Money.parse("1.90"), e.gpu_seconds * 1000)


def test_monthly_plan_is_bought_by_the_month() -> None:
    e = estimate(job(), PRICE)
    assert e.months == -(-e.wall_seconds // (720 * 3600))
    assert e.cost_monthly == cost_of(Money.parse("1.235"), e.months * 720 * 3600 * 8)
    assert e.cost_monthly_pro_rata == cost_of(Money.parse("1.235"), e.gpu_seconds)


@pytest.mark.parametrize(
    ("gpu", "gpus", "mfu"),
    [
        ("H100", 8, "0.40"),
        ("H100", 8192, "0.40"),
        ("H100", 16_384, "0.38"),
        ("A800", 64, "0.40"),
        ("RTX4090", 8, "0.30"),
        ("RTX4090", 16, "0.20"),
        ("L40S", 1, "0.30"),
    ],
)
def test_default_mfu_by_gpu_and_scale(gpu: str, gpus: int, mfu: str) -> None:
    assert default_mfu(resolve_gpu(gpu), gpus).mfu == Decimal(mfu)
    e = estimate(job(gpus=gpus, gpu=resolve_gpu(gpu)), None)
    assert e.mfu == Decimal(mfu) and e.mfu_basis != "given" and e.goodput == Decimal("0.9")


@pytest.mark.parametrize(
    ("gpu", "tflops"),
    [("H100", "989.4"), ("H200", "989"), ("A100", "312"), ("A800", "312"), ("H800", "989"),
     ("H20", "148"), ("L40S", "362"), ("RTX 4090", "165"), ("4090", "165"), ("H100-PCIe", "756")],
)  # fmt: skip
def test_peaks_from_facts(gpu: str, tflops: str) -> None:
    assert resolve_gpu(gpu).bf16_tflops == Decimal(tflops)


def test_fleet_only_gpu_uses_the_fleet_file() -> None:
    from dataclasses import replace

    b200 = replace(GPUS[0], id="B200", name="B200", aliases=(), bf16_tflops=Decimal("2250"))
    assert resolve_gpu("b200", [b200]).bf16_tflops == Decimal("2250")
    with pytest.raises(InvalidInput, match="known models: H100"):
        resolve_gpu("B300", [b200])


def test_price_book_picks_the_cheapest_data_centre() -> None:
    p = book_pricing(CATALOG, H100)
    assert p is not None and p.on_demand == Money.parse("1.90")
    assert p.monthly == Money.parse("1.235") and "price book" in p.source
    assert book_pricing(CATALOG, resolve_gpu("H200")) is None
    e = estimate(job(gpu=resolve_gpu("H200")), None)
    assert e.cost_on_demand is None and any("no price" in w for w in e.warnings)


def test_lora_costs_two_thirds_of_the_dense_term() -> None:
    full = estimate(job(mode=Mode.FULL), PRICE)
    lora = estimate(job(mode=Mode.LORA), PRICE)
    assert lora.flops_dense * 3 == full.flops_dense * 2
    assert lora.flops_attention == full.flops_attention


def test_mfu_above_the_ceiling_is_flagged() -> None:
    e = estimate(job(mfu=Decimal("0.7")), PRICE)
    assert not e.feasible and "ceiling" in e.warnings[0]


def test_comparison_is_hours_times_cards_times_price() -> None:
    e = estimate(job(), PRICE)
    ours = e.cost_on_demand
    assert ours is not None and e.comparison
    for c in e.comparison:
        rate = Decimal("7.10") if c.row.currency == "USD" else Decimal(1)
        price = Money(round_half_up(Fraction(c.row.price * rate) * 1_000_000))
        assert c.price == price
        assert c.cost == Money(round_half_up(Fraction(price.micros * e.gpu_seconds, 3600)))
        assert c.savings == c.cost - ours
        assert c.savings_percent == Decimal(
            round_half_up(Fraction(c.savings.micros * 1000, c.cost.micros))
        ).scaleb(-1)
    assert [c.cost for c in e.comparison] == sorted(c.cost for c in e.comparison)
    at_7 = estimate(job(), PRICE, Decimal("7"))
    runpod = next(c for c in at_7.comparison if c.row.provider == "RunPod community")
    assert runpod.price == Money.parse("18.83")


@settings(max_examples=60, deadline=None)
@given(
    params=st.integers(min_value=10**6, max_value=10**12),
    tokens=st.integers(min_value=10**6, max_value=10**14),
    gpus=st.integers(min_value=1, max_value=20_000),
    mfu=st.decimals(min_value=Decimal("0.01"), max_value=1, places=3),
    goodput=st.decimals(min_value=Decimal("0.05"), max_value=1, places=2),
    gpu=st.sampled_from(GPUS),
    price=st.integers(min_value=1, max_value=100_000_000),
)
def test_properties(
    params: int, tokens: int, gpus: int, mfu: Decimal, goodput: Decimal, gpu: object,
    price: int,
) -> None:  # fmt: skip
    j = Job(build_model(None, params, 32, 4096, 2048), tokens, gpu, gpus, Mode.PRETRAIN, mfu,
            goodput)  # type: ignore[arg-type]  # fmt: skip
    pricing = given_pricing(Money(price), 35)
    e = estimate(j, pricing)
    exact = Fraction(e.flops) / (Fraction(e.achieved_flops) * Fraction(goodput) * gpus)
    assert e.wall_seconds >= 1 and e.wall_seconds - 1 < exact <= e.wall_seconds
    assert e.cost_on_demand == rate_usage(Money(price), e.gpu_seconds * 1000)
    assert e.feasible == (mfu <= MFU_CEILING)
    # checking the estimate's own GPU-hours gives back (at most) MFU × goodput
    # (the claim is a Decimal of GPU-hours, so ÷ 3,600 rounds at the 28th digit)
    c = check(j, Claim(gpu_hours=Decimal(e.gpu_seconds) / 3600), pricing)
    expected = Fraction(mfu) * Fraction(goodput) * exact / e.wall_seconds
    assert abs(c.implied_mfu / expected - 1) < Fraction(1, 10**20)
    assert expected <= Fraction(mfu) * Fraction(goodput)
    assert c.feasible == (c.implied_mfu <= Fraction(MFU_CEILING))
    # more GPUs never take longer
    more = estimate(Job(j.model, tokens, j.gpu, gpus + 1, Mode.PRETRAIN, mfu, goodput), pricing)
    assert more.wall_seconds <= e.wall_seconds


@given(st.integers(min_value=1, max_value=10**9), st.integers(min_value=0, max_value=10**12))
def test_cost_of_whole_seconds_is_the_billing_rule(price: int, seconds: int) -> None:
    assert cost_of(Money(price), seconds) == rate_usage(Money(price), seconds * 1000)
