"""One typed settings tree (env prefix `CARDHOUR_`, nested with `__`) plus the fleet YAML loader."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from cardhour.core.catalog import Catalog, CatalogFile
from cardhour.core.errors import InvalidInput
from cardhour.scheduler import DEFAULT_POLICY, profile_named


class SimSettings(BaseModel):
    provision_seconds: float = Field(
        default=3.0, ge=0, description="Simulated time from launch to a running instance."
    )
    fail_rate: float = Field(
        default=0.0, ge=0, le=1, description="Share of launches the simulator fails (0..1)."
    )
    sshd: bool = Field(
        default=False,
        description="Back each simulated node with a real sshd on a loopback port (needs "
        "Debian's openssh-server): `ssh NAME` then really logs in.",
    )


class SlurmSettings(BaseModel):
    conf: Path | None = Field(
        default=None, description="The cluster's slurm.conf (SLURM_CONF) the CLI tools use."
    )
    data_centre: str = Field(
        default="bj1", description="The fleet file's data centre these nodes are in (prices)."
    )
    gres_types: dict[str, str] = Field(
        default={"h100": "H100", "a800": "A800", "rtx4090": "RTX4090"},
        description="Slurm gres type -> the fleet file's GPU model id.",
    )
    partition: str | None = Field(default=None, description="Partition to submit to.")
    ib_rails: int = Field(default=8, ge=0, description="InfiniBand NICs per node.")
    ib_gbps_per_rail: int = Field(default=400, ge=0, description="Gb/s of each NIC.")
    gate: bool = Field(
        default=False,
        description="Run the readiness gate on each job's nodes (the tools below, as steps of "
        "the job) and replace nodes Slurm reports down under running instances.",
    )
    topo_command: str = Field(
        default="nvidia-smi topo -m", description="The gate's topology probe."
    )
    ibstat_command: str = Field(default="ibstat", description="InfiniBand probe; empty: none.")
    all_reduce_command: str = Field(
        default="all_reduce_perf", description="nccl-tests all_reduce_perf (MPI build)."
    )


class HostsSettings(BaseModel):
    """The `hosts` backend: GPU servers whose agents (`cardhour agent`) join this control plane."""

    heartbeat_seconds: int = Field(
        default=10, gt=0, le=300, description="How often an idle agent reports (its heartbeat)."
    )
    lost_after_seconds: int = Field(
        default=40,
        gt=0,
        description="A host whose agent has not reported for this long is lost: it leaves the "
        "inventory and its running instances are placed again elsewhere.",
    )
    join_token_seconds: int = Field(
        default=3600, gt=0, description="How long a join token from `admin hosts add` is valid."
    )
    public_url: str | None = Field(
        default=None,
        description="The URL agents reach this control plane at (printed in the join command); "
        "default: the URL the admin's request came in on.",
    )


class MarketplaceSettings(BaseModel):
    developer_share_bp: int = Field(
        default=7000,
        ge=0,
        le=10_000,
        description="The developer's share of each call, in basis points (7000: 70/30); their "
        "share is rounded down to the micro-unit, the platform takes the rest.",
    )
    start_timeout_seconds: float = Field(
        default=30,
        gt=0,
        le=45,  # below app_replicas.SEEN_TTL: a starting replica's share must not expire
        description="How long a call waits for a replica's cold start.",
    )
    demo_apps: bool = Field(
        default=True,
        description="`cardhour up` lists the demo apps (document search, image restoration, "
        "text to speech) in the marketplace, once.",
    )
    demo_apps_dir: Path | None = Field(
        default=None,
        description="Where the demo apps are (default: examples/apps of the source checkout).",
    )
    runtime: Literal["auto", "hosts", "container", "process"] = Field(
        default="auto",
        description="How app replicas run: `hosts` (each a container on the host its share "
        "of the fleet was placed on, run by that host's agent, with the GPUs placed), "
        "`container` (each in its own image on the control plane's machine, read-only root, "
        "no network, limits: docs/dev/marketplace.md) or `process` (local processes of the "
        "platform's user and Python: no sandbox, only for apps the operator has reviewed); "
        "`auto`: `hosts` with the hosts backend, else `container`.",
    )
    app_image: str = Field(
        default="localhost/cardhour/app-python:latest",
        description="The base image app images are built from (`make images` builds this one).",
    )
    wheelhouse: Path | None = Field(
        default=None,
        description="A folder of wheels: the only source of app requirements the base image "
        "lacks (installed as named, without their dependencies, with no network).",
    )
    containers_conf: Path | None = Field(
        default=None, description="A containers.conf for Podman (CONTAINERS_CONF)."
    )


class ReconcilerSettings(BaseModel):
    interval_seconds: float = Field(
        default=1.0,
        gt=0,
        le=30,  # below app_replicas.SEEN_TTL: replicas' shares are marked seen each loop
        description="Loop period when idle.",
    )
    lease_seconds: int = Field(default=60, gt=0, description="How long a claim on a row lasts.")
    provision_timeout_seconds: int = Field(
        default=900,
        gt=0,
        description="An instance not running this long after placement fails (GPUs released).",
    )
    charge_interval_seconds: int = Field(
        default=60,
        ge=0,
        description="Post usage to the ledger at most this often per running instance.",
    )


class BillingSettings(BaseModel):
    trial_credit_days: int = Field(
        default=30, ge=0, description="Days the sign-up trial credit lasts (0: it never expires)."
    )
    low_balance_warning_seconds: int = Field(
        default=60,
        ge=0,
        description="Warn an owner when their money covers less than this much more usage of "
        "their running instances.",
    )
    autostop_grace_seconds: int = Field(
        default=30,
        ge=0,
        description="Stop a warned owner's instances this long after the warning unless the "
        "balance recovered (at once when it cannot cover what they already owe).",
    )
    quote_validity_seconds: int = Field(
        default=900, gt=0, description="How long a quote's price is honoured for a launch."
    )
    volume_retention_days: int = Field(
        default=15,
        ge=1,
        description="How long an owner's volumes are kept (and charged) once their money ran "
        "out, with notices, before they are deleted.",
    )


class SchedulerSettings(BaseModel):
    policy: str = Field(
        default=DEFAULT_POLICY,
        description="Placement policy: a profile of the engine (`fgd`, `bestfit`, `packing`, …).",
    )
    workload_window: int = Field(
        default=1000,
        ge=1,
        description="How many of the most recent instance requests form the typical workload "
        "that fragmentation-aware policies place against.",
    )

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, name: str) -> str:
        return profile_named(name).name  # ValueError naming the known policies


class PaymentSettings(BaseModel):
    webhook_secret: str | None = Field(
        default=None,
        repr=False,
        description="Shared secret of the payment provider's webhook (HMAC-SHA256 signatures); "
        "unset: POST /api/v1/payments/webhook answers 503 `not_configured`.",
    )
    webhook_tolerance_seconds: int = Field(
        default=300,
        gt=0,
        description="How far a webhook's signed timestamp may be from the server clock.",
    )


class SealingSettings(BaseModel):
    """The key renters' secrets are sealed under at rest (`db/sealing.py`)."""

    key: str | None = Field(
        default=None,
        repr=False,
        description="Base64 of 32 random bytes (`openssl rand -base64 32`), the same for every "
        "process of this control plane; default: <data_dir>/sealing.key, made on first start.",
    )
    previous_keys: list[str] = Field(
        default_factory=list,
        repr=False,
        description="Keys sealed under before a rotation: still opened; each start reseals "
        "their values under `key`.",
    )


class Settings(BaseSettings):
    """Everything `cardhour up` needs. Env: `CARDHOUR_PORT=9000`, `CARDHOUR_SIM__FAIL_RATE=0.1`."""

    model_config = SettingsConfigDict(env_prefix="CARDHOUR_", env_nested_delimiter="__")

    host: str = Field(default="127.0.0.1", description="Address the API and console listen on.")
    port: int = Field(default=8000, ge=0, le=65535, description="Port (0: pick a free one).")
    data_dir: Path = Field(default=Path(".cardhour"), description="SQLite file and local state.")
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; default: SQLite at <data_dir>/cardhour.db."
    )
    fleet_file: Path | None = Field(
        default=None, description="Fleet, price book and image catalog YAML; default: the demo."
    )
    backend: str = Field(
        default="sim",
        description="Compute backend: `sim` (simulated fleet), `hosts` (GPU servers running "
        "`cardhour agent`) or `slurm` (a real Slurm cluster).",
    )
    trial_credit: str = Field(default="10.00", description="Credit every new account gets once.")
    admin_email: str = Field(default="admin@cardhour.local", description="Bootstrap admin login.")
    secure_cookies: bool = Field(default=False, description="Mark console cookies Secure (HTTPS).")
    sim: SimSettings = SimSettings()
    slurm: SlurmSettings = SlurmSettings()
    hosts: HostsSettings = HostsSettings()
    reconcilers: ReconcilerSettings = ReconcilerSettings()
    billing: BillingSettings = BillingSettings()
    marketplace: MarketplaceSettings = MarketplaceSettings()
    scheduler: SchedulerSettings = SchedulerSettings()
    payments: PaymentSettings = PaymentSettings()
    sealing: SealingSettings = SealingSettings()

    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{(self.data_dir / 'cardhour.db').resolve()}"


def default_fleet_text() -> str:
    return resources.files("cardhour.config").joinpath("demo-fleet.yaml").read_text()


def load_catalog(path: Path | None = None) -> Catalog:
    """Read and validate the fleet YAML; raises InvalidInput naming the file and the problem."""
    name = str(path) if path else "demo-fleet.yaml"
    try:
        text = path.read_text() if path else default_fleet_text()
        raw = yaml.safe_load(text)
        return Catalog.from_file(CatalogFile.model_validate(raw))
    except OSError as exc:
        raise InvalidInput(f"cannot read fleet file {name}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise InvalidInput(f"fleet file {name} is not valid YAML: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidInput(f"fleet file {name}: {where}: {first['msg']}") from exc
