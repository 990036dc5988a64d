"""The estimator page without a browser: defaults, check mode, errors in place, the SVG chart.

The page never touches the database beyond the header, so one SQLite-backed app serves it.
"""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from cardhour.console.views.estimate import _counts


@pytest.fixture
def client(readonly_client: TestClient) -> TestClient:
    return readonly_client


def test_bare_page_shows_the_default_estimate_and_the_chart(client: TestClient) -> None:
    page = client.get("/estimate")
    assert page.status_code == 200
    assert '<a href="/estimate">Estimator</a>' in page.text
    assert 'data-testid="estimate-results"' in page.text and "31.01 days" in page.text
    assert page.text.count("<svg") == 2 and "<polyline" in page.text
    assert "FLOPs per token = 6·N + 12·L·H·Q·T" in page.text
    assert "RunPod community" in page.text and "not a live rate" in page.text
    assert client.get("/signin").text.count('href="/estimate"') == 1  # signed out: nav link too


def test_check_mode_and_the_exact_cost(client: TestClient) -> None:
    params = {"model": "llama3-70b", "tokens": "15T", "gpu": "H100", "gpus": "8", "days": "24",
              "price": "1.90"}  # fmt: skip
    page = client.get("/estimate", params=params)
    assert page.status_code == 200
    assert 'data-testid="verdict"' in page.text and "not feasible" in page.text
    assert "falls short by 742.93×" in page.text
    assert re.search(r'data-testid="implied-mfu">445\.7576<', page.text)
    assert "4,608.00 GPU-hours" in page.text


def test_custom_model_and_fleet_gpus(client: TestClient) -> None:
    params = {"model": "custom", "params": "7B", "tokens": "100B", "gpu": "RTX4090", "gpus": "8"}
    page = client.get("/estimate", params=params)
    assert page.status_code == 200 and "attention term left out" in page.text
    assert "0.60 per card-hour" in page.text  # the demo price book's RTX 4090


def test_errors_are_shown_in_place(client: TestClient) -> None:
    page = client.get("/estimate", params={"model": "llama3-8b", "tokens": "lots"})
    assert page.status_code == 422 and 'data-testid="estimate-error"' in page.text
    fragment = client.get("/console/estimate", params={"model": "llama3-8b", "tokens": "1T",
                                                       "gpus": "0"})  # fmt: skip
    assert fragment.status_code == 200 and "GPU count" in fragment.text
    assert "<html" not in fragment.text


def test_fragment_follows_the_form(client: TestClient) -> None:
    fragment = client.get("/console/estimate", params={"model": "llama3-8b", "tokens": "1T",
                                                       "gpus": "1024"})  # fmt: skip
    assert fragment.status_code == 200 and "1.94 days" in fragment.text


def test_chart_counts_are_powers_of_two_around_the_choice() -> None:
    assert _counts(64) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    assert 100 in _counts(100) and _counts(1)[0] == 1
    assert max(_counts(1_000_000)) == 1_000_000
