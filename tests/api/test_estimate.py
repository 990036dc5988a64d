"""GET /api/v1/estimate: the CLI's JSON over HTTP, no key needed, 422 with code and message.

The estimate never touches the database, so one SQLite-backed app serves the whole module.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.fixture
def client(readonly_client: TestClient) -> TestClient:
    return readonly_client


def test_estimate(client: TestClient) -> None:
    r = client.get("/api/v1/estimate", params={"model": "llama3-70b", "tokens": "15T",
                                               "gpu": "H100", "gpus": "8"})  # fmt: skip
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["price_on_demand"] == "1.90" and data["price_source"].startswith("price book")
    assert data["gpu_hours"] == 5_705_697.39 and data["cost_on_demand"] is not None
    assert data["verdict"] is None and data["comparison"]


def test_check(client: TestClient) -> None:
    params = {"model": "llama3-70b", "tokens": "15T", "gpus": "8", "days": "24", "check": "true"}
    data = client.get("/api/v1/estimate", params=params).json()
    assert data["feasible"] is False and data["shortfall_x"] > 700
    assert data["claim_cost_on_demand"] == "8755.20"
    card = client.get("/api/v1/estimate", params={
        "model": "llama3-8b", "tokens": "15T", "gpu_hours": "1.3M"}).json()  # fmt: skip
    assert card["feasible"] is True and round(card["implied_mfu"], 4) == 0.1978


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"model": "llama3-8b", "tokens": "many"}, "tokens"),
        ({"model": "llama3-8b", "tokens": "1T", "gpu": "Z9"}, "unknown GPU model"),
        ({"model": "llama3-8b", "tokens": "1T", "mfu": "0"}, "MFU"),
        ({"model": "llama3-8b", "tokens": "1T", "check": "true"}, "--days or --gpu-hours"),
        ({"model": "llama3-8b"}, "tokens"),
        # each valid alone, together too large to show (used to be a 500 or a hang)
        ({"model": "llama3-70b", "tokens": "15T", "mfu": "1e-400"}, "MFU"),
        ({"model": "llama3-70b", "tokens": "15T", "mfu": "1E-999999999"}, "MFU"),
        ({"model": "llama3-70b", "tokens": "15T", "goodput": "1e-30"}, "goodput"),
        ({"model": "llama3-70b", "tokens": "15T", "price": "1e30"}, "--price"),
        (
            {
                "params": "1e15",
                "layers": "1e4",
                "hidden": "1e6",
                "seq_len": "1e7",
                "tokens": "1e18",
                "gpus": "1",
                "mfu": "0.001",
                "goodput": "0.001",
            },
            "out of range",
        ),
    ],
)
def test_bad_input_is_422(client: TestClient, params: dict[str, str], message: str) -> None:
    r = client.get("/api/v1/estimate", params=params)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_input" and message in error["message"]


def test_in_the_openapi_document(client: TestClient) -> None:
    assert "/api/v1/estimate" in client.get("/openapi.json").json()["paths"]
