"""OCI image references and the registries a fleet runs renters' own images from.

The grammar is distribution/reference's: `[registry/]repository[:tag][@digest]`. The part before
the first `/` is the registry when it contains `.` or `:` or is `localhost`; otherwise the image
is on Docker Hub (`docker.io`, and a one-component repository is `library/<name>` there). A
parsed reference prints fully qualified (`ubuntu:24.04` → `docker.io/library/ubuntu:24.04`), so
the container runtime never searches registries of its own for a short name: what runs comes
from the registry that was checked.

A registry entry (`docker.io`, `registry.example.com/team`, `localhost:5000`) allows every
repository whose path starts with the entry's components: `registry.example.com/team` allows
`registry.example.com/team/trainer:1`, not `registry.example.com/teammate/x` nor
`registry.example.com/other/x`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from cardhour.core.errors import InvalidInput

MAX_LENGTH = 255  # the longest reference an instance stores
DOCKER_HUB = "docker.io"
GRAMMAR = "[registry/]repository[:tag][@digest], e.g. docker.io/library/ubuntu:24.04"

_ALNUM = r"[a-z0-9]+"
_COMPONENT = re.compile(rf"{_ALNUM}(?:(?:[._]|__|-+){_ALNUM})*")
_LABEL = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_REGISTRY = re.compile(rf"{_LABEL}(?:\.{_LABEL})*(?::[0-9]{{1,5}})?")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_ALGORITHM = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*"
_DIGEST = re.compile(rf"{_ALGORITHM}:[0-9a-fA-F]{{32,}}")


@dataclass(frozen=True)
class Reference:
    """A parsed reference. `registry` is `host[:port]` with the host lowercased; `path` the
    repository inside it (`library/ubuntu` on Docker Hub for `ubuntu`)."""

    registry: str
    path: str
    tag: str | None = None
    digest: str | None = None

    @property
    def repository(self) -> str:
        return f"{self.registry}/{self.path}"

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag is not None else ""
        digest = f"@{self.digest}" if self.digest is not None else ""
        return f"{self.repository}{tag}{digest}"


def _is_registry(first: str) -> bool:
    return "." in first or ":" in first or first == "localhost"


def _registry(text: str) -> str:
    """`host[:port]`, the host lowercased; ValueError unless it is one."""
    if not _REGISTRY.fullmatch(text):
        raise ValueError(text)
    host, colon, port = text.partition(":")
    return host.lower() + colon + port


def parse(text: str) -> Reference:
    """The reference `text` names; InvalidInput quoting the grammar when it is not one."""
    bad = InvalidInput(f"{text!r} is not an OCI image reference ({GRAMMAR})")
    if not text or len(text) > MAX_LENGTH:
        raise bad
    name, at, digest = text.partition("@")
    if at and not _DIGEST.fullmatch(digest):
        raise bad
    tag = None
    colon = name.rfind(":")
    if colon > name.rfind("/"):  # `localhost:5000/x` has a port, not a tag
        name, tag = name[:colon], name[colon + 1 :]
        if not _TAG.fullmatch(tag):
            raise bad
    first, slash, rest = name.partition("/")
    if slash and _is_registry(first):
        try:
            registry = _registry(first)
        except ValueError:
            raise bad from None
        path = rest
    else:
        registry, path = DOCKER_HUB, name
    parts = path.split("/")
    if not all(_COMPONENT.fullmatch(p) for p in parts):
        raise bad
    if registry == DOCKER_HUB and len(parts) == 1:
        path = f"library/{path}"
    reference = Reference(registry, path, tag, digest if at else None)
    if len(str(reference)) > MAX_LENGTH:
        raise bad
    return reference


def registry_entry(text: str) -> str:
    """A fleet file's `registries:` entry, checked: `host[:port][/path…]` where the host is a
    registry by the rule above (a `.` or `:` in it, or `localhost`). Returns it with the host
    lowercased and no trailing `/`; ValueError (the fleet file's validation) otherwise."""
    first, _, rest = text.strip().rstrip("/").partition("/")
    problem = (
        f"registry {text!r} must be host[:port][/path] with a '.' or ':' in the host, "
        "or localhost (e.g. docker.io, registry.example.com/team, localhost:5000)"
    )
    if not _is_registry(first) or not _REGISTRY.fullmatch(first):
        raise ValueError(problem)
    parts = rest.split("/") if rest else []
    if not all(_COMPONENT.fullmatch(p) for p in parts):
        raise ValueError(problem)
    return "/".join([_registry(first), *parts])


def allowed_by(reference: Reference, registries: Iterable[str]) -> str | None:
    """The first of `registries` (checked entries) whose components begin the reference's
    repository; None when none does."""
    parts = reference.repository.split("/")
    for entry in registries:
        wanted = entry.split("/")
        if parts[: len(wanted)] == wanted:
            return entry
    return None
