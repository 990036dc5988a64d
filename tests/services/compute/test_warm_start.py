"""The platform compiles its scheduler's kernels when it starts, outside any transaction.

A first compile takes minutes on a cold cache (2 min 43 s for `make kernels` on 2 cores). Done
inside the scheduling cycle's or a launch's transaction, it held SQLite's write lock so long
that concurrent requests failed with "database is locked". So: after `Platform(...)`, launching and
scheduling containers of every kind must not compile (or load) any kernel again. Run in a fresh
process, where nothing else has compiled them yet.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import json, sys
from pathlib import Path

from numba.core.registry import CPUDispatcher
from starlette.testclient import TestClient

from cardhour.api.app import create_app
from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.scheduler.kernels import fgd as fgd_kernels
from cardhour.scheduler.kernels import lookahead as lookahead_kernels
from cardhour.scheduler.request import Request
from cardhour.services.compute import fleet
from cardhour.settings import Settings

def compiled():
    return {
        f"{module.__name__}.{name}": len(value.signatures)
        for module in (fgd_kernels, lookahead_kernels)
        for name, value in vars(module).items()
        if isinstance(value, CPUDispatcher)
    }

data = Path(sys.argv[1])
platform = Platform(Settings(data_dir=data, database_url=f"sqlite:///{data / 'db.sqlite'}"))
before = compiled()
with TestClient(create_app(platform)) as client:
    r = client.post("/api/v1/auth/signup", json={"email": "w@example.com", "password": "pw123456"})
    auth = {"Authorization": f"Bearer {r.json()['api_key']}"}
    launches = [{"gpu": gpu, "count": n} for gpu, n in (("H100", 1), ("H100", 2), ("RTX4090", 1))]
    codes = [client.post("/api/v1/instances", headers=auth, json=b).status_code for b in launches]
    platform.reconcile()
    with transaction(platform.sessions) as session:
        state = fleet.load(session, platform.catalog).state
    for i, (cpu, gpus, milli) in enumerate([(2000, 1, 250), (4000, 1, 500), (1000, 0, 0)] * 3):
        platform.policy.bind(state, Request(f"extra-{i}", cpu, 1024, gpus, milli))
    placed = int((state.gpu_free < 1000).sum())
platform.stop()
after = compiled()
print(json.dumps({
    "codes": codes,
    "placed_gpus": placed,
    "rollouts": before["cardhour.scheduler.kernels.lookahead.rollouts"],
    "new": {name: after[name] - before[name] for name in after if after[name] != before[name]},
}))
"""


def test_launching_after_start_compiles_nothing(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["codes"] == [201] * 3
    assert out["placed_gpus"] >= 5  # the launches were scheduled, and the shares bound
    assert out["rollouts"] == 1  # compiled (or loaded) at start
    assert out["new"] == {}
