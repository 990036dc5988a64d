"""Raw text in, the JSON report out: the shape the CLI and the API share, and one-line errors."""

from __future__ import annotations

import pytest

from cardhour.core.errors import InvalidInput
from cardhour.estimator import EstimateQuery, run
from cardhour.settings import load_catalog

CATALOG = load_catalog()


def test_estimate_fields() -> None:
    r = run(EstimateQuery(tokens="15T", model="llama3-70b", gpus="8", price="1.90"), CATALOG)
    data = r.model_dump(mode="json")
    for key in ("flops", "gpu_hours", "days", "tokens_per_second_per_gpu", "cost_on_demand"):
        assert data[key] is not None, key
    assert isinstance(data["cost_on_demand"], str) and data["currency"] == "CNY"
    assert data["price_source"] == "given" and data["price_monthly"] == "1.235"
    assert data["implied_mfu"] is None and data["feasible"] is True
    assert data["mfu"] == 0.4 and "Llama 3.1" in data["mfu_basis"]
    assert any(line.startswith("FLOPs per token = 6·N + 12·L·H·Q·T") for line in data["formula"])
    assert data["comparison"] and data["usd_cny"] == "7.10"


def test_check_fields() -> None:
    q = EstimateQuery(tokens="15T", model="llama3-70b", gpus="8", check=True, days="24",
                      price="1.90")  # fmt: skip
    r = run(q, CATALOG)
    assert r.feasible is False and r.shortfall_x is not None and r.shortfall_x > 700
    assert r.claim_cost_on_demand == "8755.20" and r.claim_gpu_hours == 4608
    assert r.verdict and r.verdict.startswith("not feasible") and "falls short by" in r.verdict
    assert r.implied_mfu is not None and r.implied_mfu > 400


def test_price_book_is_the_default_price() -> None:
    r = run(EstimateQuery(tokens="1T", model="llama3-8b", gpu="A800"), CATALOG)
    assert r.price_on_demand == "1.20" and r.price_source.startswith("price book")
    without = run(EstimateQuery(tokens="1T", model="llama3-8b", gpu="H200"), CATALOG)
    assert without.cost_on_demand is None and without.comparison


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"tokens": "lots"}, "tokens"),
        ({"tokens": "15T", "model": "gpt-5"}, "unknown model"),
        ({"tokens": "15T", "model": None}, "--params"),
        ({"tokens": "15T", "gpu": "B300"}, "unknown GPU model"),
        ({"tokens": "15T", "gpus": "0"}, "GPU count"),
        ({"tokens": "15T", "gpus": "2000000"}, "GPU count"),
        ({"tokens": "15T", "mfu": "1.5"}, "MFU"),
        ({"tokens": "15T", "goodput": "0"}, "goodput"),
        ({"tokens": "15T", "price": "1.9.0"}, "price"),
        ({"tokens": "15T", "price": "0"}, "price"),
        ({"tokens": "15T", "price": "1.0000001"}, "price"),
        ({"tokens": "15T", "mode": "qlora"}, "mode must be one of"),
        ({"tokens": "15T", "check": True}, "--days or --gpu-hours"),
        ({"tokens": "15T", "days": "1", "gpu_hours": "1M"}, "exactly one"),
        ({"tokens": "15T", "days": "100000"}, "days"),
        ({"tokens": "15T", "usd_cny": "-7"}, "rate"),
        ({"tokens": "15T", "layers": "1.5"}, "layers"),
    ],
)
def test_bad_input_is_one_line(fields: dict[str, object], message: str) -> None:
    q = EstimateQuery(**{"model": "llama3-8b", **fields})  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=message) as err:
        run(q, CATALOG)
    assert "\n" not in err.value.message
