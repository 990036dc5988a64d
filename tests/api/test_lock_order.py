"""A user's stop while a metering pass holds the revenue account must wait, not deadlock (a
PostgreSQL deadlock here once turned the stop into a 500)."""

from __future__ import annotations

import threading
import time

from cardhour.services.billing import metering
from cardhour.store.compute import instances as instance_store
from tests.conftest import Api


def test_stop_during_a_metering_pass_waits_for_it(api: Api) -> None:
    alice, bob = api.signup(), api.signup()
    for headers, name in ((bob, "b"), (alice, "j"), (alice, "i")):
        body = {"gpu": "RTX4090", "name": name}
        assert api.client.post("/api/v1/instances", headers=headers, json=body).status_code == 201
    api.settle()
    api.settle(30)
    api.clock.advance(5)
    ids = {
        name: api.client.get(f"/api/v1/instances/{name}", headers=headers).json()["id"]
        for headers, name in ((bob, "b"), (alice, "j"))
    }
    # a metering pass, mid-way: it locked b and j, charged b (so holds platform:revenue) ...
    meter = api.platform.sessions()
    b = instance_store.get_instance(meter, ids["b"], lock=True)
    j = instance_store.get_instance(meter, ids["j"], lock=True)
    assert b is not None and j is not None
    metering.settle(meter, b, api.clock.now())
    result: dict[str, int] = {}

    def stop_i() -> None:  # ... while alice stops i, which it had not locked
        result["stop"] = api.client.post("/api/v1/instances/i/stop", headers=alice).status_code

    user = threading.Thread(target=stop_i)
    user.start()
    time.sleep(1.0)  # let the stop reach its locks
    metering.settle(meter, j, api.clock.now())  # ... and then charges alice
    meter.commit()
    meter.close()
    user.join(timeout=60)
    assert result == {"stop": 200}
