"""The agent's settings: flags of `cardhour agent`, or `CARDHOUR_AGENT__*` environment variables
(`CARDHOUR_AGENT__STANDIN_GPUS=H100:8`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from cardhour.api.schemas.hosts import ADDRESS


class AgentSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CARDHOUR_AGENT__")

    server: str = Field(default="http://127.0.0.1:8000", description="The control plane's URL.")
    token: str | None = Field(
        default=None, repr=False, description="Join token from `cardhour admin hosts add`."
    )
    state_dir: Path = Field(
        default=Path("/var/lib/cardhour-agent"),
        description="The host credential (mode 0600), the SSH entrypoint and keys files.",
    )
    address: str = Field(
        default="127.0.0.1",
        max_length=253,
        pattern=ADDRESS,
        description="The address renters reach this server's published ports at (reported "
        "to the control plane); ports are published on it.",
    )
    runtime: str = Field(default="auto", description="auto | podman | docker.")
    containers_conf: Path | None = Field(
        default=None, description="A containers.conf for Podman (CONTAINERS_CONF)."
    )
    weights_dir: Path = Field(
        default=Path("/var/lib/cardhour-agent/weights"),
        description="The host's model weights cache: `<dir>/<id>` is mounted read-only.",
    )
    volumes_dir: Path | None = Field(
        default=None,
        description="This host's own persistent volumes (one ext4 image each; default "
        "`<state_dir>/volumes`). Volumes of a data centre with shared storage live on its "
        "shared path instead.",
    )
    standin_gpus: str | None = Field(
        default=None,
        description="TEST MACHINES ONLY: report stand-in GPUs (`MODEL:COUNT`, e.g. H100:8) "
        "backed by /dev/null instead of reading nvidia-smi. Never the default.",
    )
    cdi_dir: Path = Field(
        default=Path("/var/run/cdi"), description="Where stand-in GPUs' CDI spec is written."
    )
    poll_seconds: float = Field(
        default=0.1, gt=0, description="How soon to report again while containers change."
    )
    inventory_seconds: float = Field(
        default=300,
        gt=0,
        description="How often the inventory (GPUs, links, CPUs, memory, disk size) is read "
        "again; a change is reported with the next heartbeat.",
    )
