"""The formula with every input, as lines a user can redo by hand, and the check's verdict.

Number formats: integers grouped by thousands (exact), large values in scientific notation with
four significant digits (`4.115e25`), shares as given. The lines show rounded intermediates;
the results are computed from the exact values, so the last digit can differ from a rerun on
the rounded ones (never the cost: it is shown from whole seconds, which are exact).
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from cardhour.core.money import Money
from cardhour.estimator.cost import SECONDS_PER_DAY, SECONDS_PER_HOUR, decimal_places
from cardhour.estimator.estimate import Check, Estimate
from cardhour.estimator.models import DENSE_FACTOR, Mode


def sci(value: float | Fraction | Decimal, digits: int = 4) -> str:
    """`4.115e25`: `digits` significant digits."""
    mantissa, _, exponent = f"{float(value):.{digits - 1}e}".partition("e")
    return f"{mantissa}e{int(exponent)}"


def grouped(value: int) -> str:
    return f"{value:,}"


def fixed(value: Fraction, places: int) -> str:
    """Half up to `places` decimals, grouped: `31,772,812.80`."""
    return f"{decimal_places(value, places):,.{places}f}"


def money(value: Money) -> str:
    """Half up to the fen, grouped: `8,755.20`."""
    return f"{Decimal(value.format()):,.2f}"


def share(value: Decimal) -> str:
    """A Decimal as typed, without exponent or trailing zeros, grouped: `0.404`, `6,400,000`."""
    return f"{value.normalize():,f}"


def percent(value: Fraction, places: int = 1) -> str:
    return f"{decimal_places(value * 100, places):,}%"


def short_count(value: int) -> str:
    """`15T`, `15.6T`, `500B`, `1.3M` when exact to three decimals, else grouped digits."""
    for suffix, power in (("T", 12), ("B", 9), ("M", 6), ("k", 3)):
        scaled = Fraction(value, 10**power)
        if scaled >= 1 and (suffix == "T" or scaled < 1000) and (scaled * 1000).denominator == 1:
            text = f"{Decimal(int(scaled * 1000)).scaleb(-3):f}"
            return (text.rstrip("0").rstrip(".") if "." in text else text) + suffix
    return grouped(value)


def compute_lines(e: Estimate) -> list[str]:
    m, job = e.job.model, e.job
    k = DENSE_FACTOR[job.mode]
    lora = " (LoRA: 4·N, 2/3 of 6·N)" if job.mode is Mode.LORA else ""
    inputs = [f"N = {grouped(m.params)} parameters"]
    if m.has_attention_term:
        assert m.layers and m.hidden and m.seq_len
        heads = f" ({m.heads} heads × {m.hidden // m.heads})" if m.heads else ""
        inputs += [
            f"L = {m.layers} layers",
            f"H·Q = {grouped(m.hidden)}{heads}",
            f"T = {grouped(m.seq_len)} tokens of context",
        ]
        per_token = (
            f"FLOPs per token = {k}·N + 12·L·H·Q·T{lora} = {k} × {grouped(m.params)} + 12 × "
            f"{m.layers} × {grouped(m.hidden)} × {grouped(m.seq_len)} = "
            f"{grouped(e.dense_per_token)} + {grouped(e.attention_per_token)} = "
            f"{grouped(e.flops_per_token)}"
        )
    else:
        per_token = (
            f"FLOPs per token = {k}·N{lora} = {k} × {grouped(m.params)} = "
            f"{grouped(e.flops_per_token)} (no attention term: shape not given)"
        )
    return [
        "inputs: " + ", ".join(inputs) + f", D = {grouped(job.tokens)} tokens",
        per_token,
        f"FLOPs = FLOPs per token × D = {grouped(e.flops_per_token)} × {grouped(job.tokens)} = "
        f"{sci(e.flops)} ({k}·N·D = {sci(e.flops_dense)}, attention = {sci(e.flops_attention)})",
    ]


def estimate_lines(e: Estimate) -> list[str]:
    job = e.job
    peak = f"{share(job.gpu.bf16_tflops)}e12"
    lines = compute_lines(e)
    lines += [
        f"per GPU = peak × MFU = {peak} × {share(e.mfu)} = {sci(e.achieved_flops)} FLOP/s; "
        f"tokens/s per GPU = {sci(e.achieved_flops)} ÷ {grouped(e.flops_per_token)} = "
        f"{fixed(e.tokens_per_second_per_gpu, 1)}",
        f"GPU-seconds = FLOPs ÷ (peak × MFU × goodput) = {sci(e.flops)} ÷ ({peak} × "
        f"{share(e.mfu)} × {share(e.goodput)}) = {sci(e.compute_gpu_seconds)}",
        f"wall clock = ceil(GPU-seconds ÷ GPUs) = ceil({sci(e.compute_gpu_seconds)} ÷ "
        f"{grouped(job.gpus)}) = {grouped(e.wall_seconds)} s = "
        f"{fixed(Fraction(e.wall_seconds, SECONDS_PER_DAY), 2)} days",
        f"GPU-hours = GPUs × wall clock ÷ 3,600 = {grouped(job.gpus)} × "
        f"{grouped(e.wall_seconds)} ÷ 3,600 = {fixed(e.gpu_hours, 2)}",
    ]
    if e.pricing and e.cost_on_demand is not None and e.cost_monthly is not None:
        p, cur = e.pricing, e.pricing.on_demand.currency
        lines += [
            f"on demand = GPUs × seconds ÷ 3,600 × price = {grouped(job.gpus)} × "
            f"{grouped(e.wall_seconds)} ÷ 3,600 × {p.on_demand.display()} = "
            f"{money(e.cost_on_demand)} {cur}",
            f"monthly plan (−{p.monthly_discount_percent}%, bought by 30-day month) = "
            f"{e.months} × 720 h × {grouped(job.gpus)} × {p.monthly.display()} = "
            f"{money(e.cost_monthly)} {cur}",
        ]
    return lines


def check_lines(c: Check) -> list[str]:
    e, claim = c.estimate, c.claim
    peak = f"{share(e.job.gpu.bf16_tflops)}e12"
    if claim.days is not None:
        given = (
            f"claimed GPU-seconds = {share(claim.days)} days × 86,400 × {grouped(e.job.gpus)} "
            f"GPUs = {sci(c.gpu_seconds)}"
        )
    else:
        assert claim.gpu_hours is not None
        given = (
            f"claimed GPU-seconds = {share(claim.gpu_hours)} GPU-hours × 3,600 = "
            f"{sci(c.gpu_seconds)}"
        )
    return [
        *compute_lines(e),
        given,
        f"implied MFU = FLOPs ÷ (GPU-seconds × peak) = {sci(e.flops)} ÷ ({sci(c.gpu_seconds)} × "
        f"{peak}) = {float(c.implied_mfu):.4f} "
        f"(by {DENSE_FACTOR[e.job.mode]}·N·D alone: {float(c.implied_mfu_dense):.4f})",
        f"at the {share(c.ceiling)} ceiling: at least FLOPs ÷ (peak × {share(c.ceiling)}) = "
        f"{fixed(c.min_gpu_seconds / SECONDS_PER_HOUR, 0)} GPU-hours",
    ]


def verdict(c: Check) -> str:
    """One sentence: feasible or not, the implied MFU, and how it compares with our estimate."""
    e = c.estimate
    ceiling = Fraction(c.ceiling)
    k = DENSE_FACTOR[e.job.mode]
    if c.feasible:
        expected = Fraction(e.mfu) * Fraction(e.goodput)
        ratio = c.gpu_seconds / e.gpu_seconds
        text = (
            f"feasible: the claim implies an end-to-end MFU of {percent(c.implied_mfu)} "
            f"({percent(c.implied_mfu_dense)} by {k}·N·D alone), within the "
            f"{percent(ceiling, 0)} ceiling; our estimate (MFU {share(e.mfu)} × goodput "
            f"{share(e.goodput)} = {percent(expected)}) needs {fixed(e.gpu_hours, 0)} GPU-hours"
        )
        if ratio >= 1:
            return text + (
                f", and the claim gives {fixed(ratio, 2)}× that: it likely counts more than one "
                "clean run (restarts, ablations, other stages)"
            )
        return text + f", and the claim needs a run {fixed(1 / ratio, 2)}× more efficient"
    shortfall = c.shortfall_x
    assert shortfall is not None
    min_days = c.min_gpu_seconds / e.job.gpus / SECONDS_PER_DAY
    return (
        f"not feasible: the claim needs an end-to-end MFU of {percent(c.implied_mfu)} of dense "
        f"BF16 peak, above the {percent(ceiling, 0)} ceiling (no published run comes close); "
        f"it falls short by {fixed(shortfall, 2)}×: the job needs at least "
        f"{fixed(c.min_gpu_seconds / SECONDS_PER_HOUR, 0)} GPU-hours "
        f"({fixed(min_days, 1)} days on {grouped(e.job.gpus)} GPUs)"
    )
