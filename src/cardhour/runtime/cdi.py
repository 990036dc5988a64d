"""CDI specs of STAND-IN GPUs: test machines without GPUs, never the default.

A stand-in GPU is a CDI device whose node `/dev/nvidia<index>` is backed by the host's
`/dev/null` (char 1:3), with an env entry `CARDHOUR_STANDIN_GPU_<index>=<uuid>` and a read-only
info file at `/etc/cardhour/gpus/<index>` (index, UUID, model). `podman run --device
<kind>=2 --device <kind>=3` then shows exactly `/dev/nvidia2` and `/dev/nvidia3` inside, like
`nvidia.com/gpu=2` on a real host (spec from `nvidia-ctk cdi generate`). Devices are named by
index and by UUID, as NVIDIA's are.

Several agents on one machine are several stand-in hosts: each needs its own kind, because
specs of one kind in one folder must not name the same device twice. `standin_kind(host)` gives
`<host>.standin.cardhour/gpu` (CDI: kind = `vendor/class`; vendor and class are letters,
digits, `-`, `_`, `.`, starting with a letter and ending with a letter or digit, so a host name
fits in the vendor). The spec file is named after the kind, hence unique per agent.

Where: Podman 4.3 reads specs only from `/etc/cdi` and `/var/run/cdi` (its `--cdi-spec-dir`
global option and containers.conf `cdi_spec_dirs` came later); `DEFAULT_FOLDER` is the
ephemeral one. Newer Podman takes another folder through `PodmanRuntime(cdi_dirs=...)`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: the folder Podman 4.3 reads specs from that vanishes at reboot (stand-ins should too)
DEFAULT_FOLDER = Path("/var/run/cdi")
#: CDI's kind syntax: vendor (domain-like) / class
KIND = re.compile(r"[a-zA-Z][a-zA-Z0-9_.-]*[a-zA-Z0-9]/[a-zA-Z][a-zA-Z0-9_.-]*[a-zA-Z0-9]")
#: device names: letters, digits, `-`, `_`, `.`, `:`
DEVICE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.:-]*")


@dataclass(frozen=True)
class StandinGpu:
    index: int
    uuid: str
    model: str = "stand-in GPU"


def standin_kind(host: str) -> str:
    """The stand-in kind of the agent serving `host` (a host name as `core.hosts` allows)."""
    kind = f"{host}.standin.cardhour/gpu"
    if not KIND.fullmatch(kind):
        raise ValueError(f"host name {host!r} does not make a CDI kind")
    return kind


def spec_path(folder: Path, kind: str) -> Path:
    """Where `write_standin_spec` puts the spec of `kind` (`vendor-class.json`, as CDI names)."""
    vendor, cls = kind.split("/", 1)
    return folder / f"{vendor}-{cls}.json"


def write_standin_spec(folder: Path, kind: str, gpus: Sequence[StandinGpu]) -> Path:
    """Write (atomically, replacing an older one) the CDI spec of these stand-in GPUs under
    `kind`, and their info files next to it; returns the spec's path. Raises ValueError on a
    kind, index or UUID that CDI would reject, or on a duplicate."""
    if not KIND.fullmatch(kind):
        raise ValueError(f"bad CDI kind {kind!r}: want vendor/class, e.g. cardhour.standin/gpu")
    names = [str(g.index) for g in gpus] + [g.uuid for g in gpus]
    bad = [n for n in names if not DEVICE.fullmatch(n)]
    if bad or len(set(names)) != len(names) or any(g.index < 0 for g in gpus):
        raise ValueError(f"bad or duplicate stand-in GPU names: {bad or names}")
    folder.mkdir(parents=True, exist_ok=True)
    path = spec_path(folder, kind)
    info_dir = path.with_suffix(".d")
    info_dir.mkdir(exist_ok=True)
    devices = []
    for gpu in gpus:
        info = info_dir / f"gpu{gpu.index}"
        info.write_text(
            f"index: {gpu.index}\nuuid: {gpu.uuid}\nmodel: {gpu.model}\nstandin: true\n"
        )
        edits = {
            "deviceNodes": [{"path": f"/dev/nvidia{gpu.index}", "hostPath": "/dev/null"}],
            "env": [f"CARDHOUR_STANDIN_GPU_{gpu.index}={gpu.uuid}"],
            "mounts": [
                {
                    "hostPath": str(info),
                    "containerPath": f"/etc/cardhour/gpus/{gpu.index}",
                    "options": ["ro", "bind"],
                }
            ],
        }
        devices += [
            {"name": str(gpu.index), "containerEdits": edits},
            {"name": gpu.uuid, "containerEdits": edits},
        ]
    spec = {"cdiVersion": "0.5.0", "kind": kind, "devices": devices}
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(spec, indent=2) + "\n")
    tmp.replace(path)
    return path


def remove_standin_spec(folder: Path, kind: str) -> None:
    """Remove the spec of `kind` and its info files; silent when gone."""
    path = spec_path(folder, kind)
    path.unlink(missing_ok=True)
    info_dir = path.with_suffix(".d")
    if info_dir.is_dir():
        for info in info_dir.iterdir():
            info.unlink()
        info_dir.rmdir()
