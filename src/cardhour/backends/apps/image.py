"""An app version's image: what it is built from, in one place for both launchers.

`write_context` writes the build context (a Containerfile FROM the operator's app base image,
the manifest's requirements that the base lacks installed by pip from the wheelhouse only,
the package at `/app`, the runner at `/opt/cardhour/runner.py`, user 65534). The container
launcher builds it on the control plane's machine; the hosts launcher hands it, packed by
`packed_context`, to the agent of the host a replica was placed on, which builds it there.
`digest` names what the image is built from (package, requirements, runner, base image's
name); with the base image's labels it makes the image's build label (`core.replicas.build_key`):
an image whose label differs is stale and built again.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path

from cardhour.backends.apps import runner
from cardhour.backends.apps.process import requirement_name
from cardhour.core.replicas import REPLICA_SOCKET, REPLICA_SOCKET_DIR, REPLICA_USER, AppSpec


def normalise(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheels_in(folder: Path | None) -> dict[str, tuple[str, Path]]:
    """The wheels of `folder`: normalised name → (version, file); empty when there is none."""
    found: dict[str, tuple[str, Path]] = {}
    if folder is None or not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.whl")):
        parts = path.name.split("-")
        if len(parts) >= 5:
            found[normalise(parts[0])] = (parts[1], path)
    return found


def slug(text: str) -> str:
    """`text` fit for a container name and an image tag (lowercase, `[a-z0-9-]`)."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "x"


def tag(spec: AppSpec) -> str:
    """The version's image tag: `localhost/cardhour-app/<app id>:v<version>`."""
    app_id, _, version = spec.key.rpartition(":")
    return f"localhost/cardhour-app/{slug(app_id)}:v{slug(version)}"


def digest(spec: AppSpec, base_image: str) -> str:
    """What the version's image is built from, hashed (16 hex digits)."""
    hashed = hashlib.sha256()
    for part in (
        spec.package.read_bytes(),
        json.dumps([spec.entrypoint, sorted(spec.requirements), base_image]).encode(),
        Path(runner.__file__).read_bytes(),
    ):
        hashed.update(hashlib.sha256(part).digest())
    return hashed.hexdigest()[:16]


def write_context(spec: AppSpec, base_image: str, wheelhouse: Path | None, dest: Path) -> None:
    """Write the version's build context into the empty folder `dest` (module docstring).
    OSError or zipfile.BadZipFile when the package cannot be read."""
    with zipfile.ZipFile(spec.package) as archive:
        archive.extractall(dest / "app")
    shutil.copy(runner.__file__, dest / "runner.py")
    lines = [f"FROM {base_image}"]
    if spec.requirements:
        (dest / "wheels").mkdir()
        wheels = wheels_in(wheelhouse)
        for line in spec.requirements:
            wheel = wheels.get(normalise(requirement_name(line) or ""))
            if wheel is not None:
                shutil.copy(wheel[1], dest / "wheels")
        (dest / "requirements.txt").write_text("\n".join(spec.requirements) + "\n")
        lines += [
            "COPY wheels /tmp/wheels",
            "COPY requirements.txt /tmp/requirements.txt",
            "RUN python3 -m pip install --quiet --no-cache-dir --no-index --no-deps "
            "--break-system-packages --find-links /tmp/wheels -r /tmp/requirements.txt "
            "&& rm -rf /tmp/wheels /tmp/requirements.txt",
        ]
    socket = f"{REPLICA_SOCKET_DIR}/{REPLICA_SOCKET}"
    argv = ["python3", "/opt/cardhour/runner.py", "--dir", "/app",
            "--entrypoint", spec.entrypoint, "--socket", socket]  # fmt: skip
    lines += [
        "COPY app /app",
        "COPY runner.py /opt/cardhour/runner.py",
        f"USER {REPLICA_USER}",
        "WORKDIR /app",
        f"CMD {json.dumps(argv)}",
    ]
    (dest / "Containerfile").write_text("\n".join(lines) + "\n")


def packed_context(spec: AppSpec, base_image: str, wheelhouse: Path | None) -> bytes:
    """`write_context`'s folder as a gzipped tar (what an agent fetches)."""
    with tempfile.TemporaryDirectory(prefix="cardhour-context-") as folder:
        write_context(spec, base_image, wheelhouse, Path(folder))
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode="w:gz") as archive:
            archive.add(folder, arcname=".")
        return packed.getvalue()
