"""The image calls of the Podman (and Docker) CLI runtime: whether an image is here, pulling
it, building one offline, its labels and the ENTRYPOINT/CMD it declares, and a container's
disk kept as an image (`commit`, `remove_image`).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from cardhour.runtime.base import ImageUnavailable, RuntimeFailure
from cardhour.runtime.engine_cli import build_failure, last_line


class PodmanImages:
    """Mixed into `PodmanRuntime`, which provides `_call` (the engine's CLI) and
    `call_timeout`."""

    call_timeout: int
    _call: Callable[..., subprocess.CompletedProcess[str]]

    #: the engine's "is this image here" call (Docker has no `image exists`)
    image_present = ("image", "exists")

    def ensure_image(self, ref: str) -> None:
        if self._call([*self.image_present, ref]).returncode == 0:
            return
        if ref.startswith("localhost/"):
            raise ImageUnavailable(f"image {ref} is not on this host (local builds are not pulled)")
        pulled = self._call(["pull", "--quiet", ref], timeout=max(self.call_timeout, 1800))
        if pulled.returncode != 0:
            reason = last_line(pulled.stderr)
            raise ImageUnavailable(f"image {ref} is not on this host and its pull failed: {reason}")

    #: never pull the base of a build (Docker's `build` does not pull a local image anyway)
    build_flags: tuple[str, ...] = ("--pull=never",)

    def build(self, context: str, tag: str, labels: dict[str, str]) -> None:
        label_args = [arg for k, v in sorted(labels.items()) for arg in ("--label", f"{k}={v}")]
        argv = ["build", "--quiet", *self.build_flags, "--network=none", *label_args, "-t", tag]
        result = self._call([*argv, context], timeout=max(self.call_timeout, 600))
        if result.returncode != 0:
            raise RuntimeFailure(f"building {tag} failed: {build_failure(result.stderr)}")

    def image_labels(self, ref: str) -> dict[str, str] | None:
        result = self._call(["image", "inspect", "--format", "{{json .Config.Labels}}", ref])
        if result.returncode != 0:
            return None
        return dict(json.loads(result.stdout or "null") or {})

    def image_config(self, ref: str) -> tuple[list[str], list[str]]:
        """The ENTRYPOINT and CMD image `ref` declares (empty lists when it declares none),
        pulling it when it is not here (`ensure_image`): one engine call when it is."""
        inspected = self._call(["image", "inspect", "--format", "{{json .Config}}", ref])
        if inspected.returncode != 0:
            self.ensure_image(ref)
            inspected = self._call(["image", "inspect", "--format", "{{json .Config}}", ref])
            if inspected.returncode != 0:
                raise RuntimeFailure(last_line(inspected.stderr))
        config = json.loads(inspected.stdout) or {}
        return list(config.get("Entrypoint") or []), list(config.get("Cmd") or [])

    #: Docker's `commit` has no `--quiet`
    commit_flags: tuple[str, ...] = ("--quiet",)

    def commit(self, name: str, ref: str) -> None:
        """Keep container `name`'s file system (its image and every change made in it) as
        image `ref`, replacing an image of that name; the mounts are not part of it.
        RuntimeFailure when the container is gone."""
        args = ["commit", *self.commit_flags, name, ref]
        result = self._call(args, timeout=max(self.call_timeout, 900))
        if result.returncode != 0:
            raise RuntimeFailure(f"cannot keep the disk of {name}: {last_line(result.stderr)}")

    def remove_image(self, ref: str) -> None:
        """Remove image `ref`; silent when it is not here."""
        result = self._call(["rmi", "--force", ref])
        text = result.stderr.lower()
        if result.returncode != 0 and not any(w in text for w in ("not known", "no such image")):
            raise RuntimeFailure(last_line(result.stderr))

    def image_layers(self, ref: str) -> int | None:
        result = self._call(["image", "inspect", "--format", "{{len .RootFS.Layers}}", ref])
        if result.returncode != 0:
            return None
        return int(result.stdout.strip() or 0)

    def squash(self, ref: str) -> None:
        """`build --squash-all` of `FROM <its id>`, offline (one layer, the config kept), named
        `ref` only if `ref` still names the image it was made from (a commit meanwhile wins)."""
        old = self._call(["image", "inspect", "--format", "{{.Id}}", ref]).stdout.strip()
        if not old:
            raise RuntimeFailure(f"cannot flatten {ref}: it is not here")
        flat = f"localhost/cardhour-squash/{old[:12]}:latest"
        with tempfile.TemporaryDirectory(prefix="cardhour-squash-") as context:
            Path(context, "Containerfile").write_text(f"FROM {old}\n", encoding="utf-8")
            argv = ["build", "--quiet", *self.build_flags, "--squash-all", "--network=none"]
            result = self._call([*argv, "-t", flat, context], timeout=max(self.call_timeout, 3600))
        if result.returncode != 0:
            raise RuntimeFailure(f"cannot flatten {ref}: {build_failure(result.stderr)}")
        now = self._call(["image", "inspect", "--format", "{{.Id}}", ref]).stdout.strip()
        if now == old:
            self.tag(flat, ref)
        self.remove_image(flat)  # the name only, when `ref` has it
        if now == old:
            self._call(["rmi", old])  # the deep one, unless something still uses it
        else:
            raise RuntimeFailure(f"{ref} changed while it was flattened: left as it is")

    def tag(self, ref: str, new_ref: str) -> None:
        result = self._call(["tag", ref, new_ref])
        if result.returncode != 0:
            raise RuntimeFailure(f"cannot name {ref} {new_ref}: {last_line(result.stderr)}")

    def save(self, ref: str, path: str) -> None:
        result = self._call(
            ["save", "--quiet", "-o", path, ref], timeout=max(self.call_timeout, 3600)
        )
        if result.returncode != 0:
            raise RuntimeFailure(f"cannot save {ref}: {last_line(result.stderr)}")

    def load(self, path: str) -> str:
        result = self._call(["load", "--quiet", "-i", path], timeout=max(self.call_timeout, 3600))
        loaded = [
            line.split(":", 1)[1].strip()
            for line in result.stdout.splitlines()
            if line.startswith("Loaded image")
        ]
        if result.returncode != 0 or not loaded:
            raise RuntimeFailure(f"cannot load {path}: {last_line(result.stderr or result.stdout)}")
        return loaded[-1]

    def image_size(self, ref: str) -> int | None:
        """Image `ref`'s size in bytes (its layers, shared ones included); None when not here."""
        result = self._call(["image", "inspect", "--format", "{{.Size}}", ref])
        if result.returncode != 0:
            return None
        return int(result.stdout.strip() or 0)

    def images(self, repository: str, labels: dict[str, str]) -> list[str]:
        """The references (`repository/name:tag`) of the images here under `repository` that
        carry all of `labels` (a commit keeps the container's labels)."""
        filters = [a for k, v in sorted(labels.items()) for a in ("--filter", f"label={k}={v}")]
        argv = ["images", "--format", "{{.Repository}}:{{.Tag}}", "--filter",
                f"reference={repository}/*", *filters]  # fmt: skip
        for _ in range(3):  # an image removed while it is listed fails the listing: again
            out = self._call(argv)
            if out.returncode == 0:
                break
        else:
            raise RuntimeFailure(last_line(out.stderr))
        prefix = f"{repository}/"
        return sorted({line for line in out.stdout.split() if line.startswith(prefix)})
