"""Concurrent launches by one user cannot overspend the balance check (both databases)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.conftest import Api


def test_parallel_launches_respect_the_one_hour_rule(api: Api) -> None:
    headers = api.signup()

    def launch(i: int) -> int:
        body = {"gpu": "H100", "count": 1, "name": f"p{i}"}
        return api.client.post("/api/v1/instances", headers=headers, json=body).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = list(pool.map(launch, range(12)))
    # 10.00 CNY covers five hours of one H100 (5 × 1.90); never more, whatever the interleaving
    assert codes.count(201) == 5, codes
    assert set(codes) == {201, 402}
