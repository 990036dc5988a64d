"""A renter's workload as pure rules: OCI references, the fleet's registry allow-list, the
catalog's resolution of an instance's `image`, and the command/env/ports limits."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml
from pydantic import ValidationError

from cardhour.core.catalog import Catalog, CatalogFile
from cardhour.core.errors import InvalidInput
from cardhour.core.workload import oci, spec
from cardhour.settings import default_fleet_text, load_catalog

DIGEST = "sha256:" + "a" * 64

# text → (registry, path, tag, digest), fully qualified
PARSED = [
    ("ubuntu", ("docker.io", "library/ubuntu", None, None)),
    ("ubuntu:24.04", ("docker.io", "library/ubuntu", "24.04", None)),
    ("pytorch/pytorch:2.3.1-cuda12.1", ("docker.io", "pytorch/pytorch", "2.3.1-cuda12.1", None)),
    ("docker.io/ubuntu", ("docker.io", "library/ubuntu", None, None)),
    ("localhost/cardhour/deepspeed:latest", ("localhost", "cardhour/deepspeed", "latest", None)),
    ("localhost:5000/x", ("localhost:5000", "x", None, None)),
    (
        "Registry.Example.com:443/team/a_b.c-d:V1",
        ("registry.example.com:443", "team/a_b.c-d", "V1", None),
    ),
    (f"ghcr.io/org/img@{DIGEST}", ("ghcr.io", "org/img", None, DIGEST)),
    (f"ghcr.io/org/img:1@{DIGEST}", ("ghcr.io", "org/img", "1", DIGEST)),
    ("a/b/c/d", ("docker.io", "a/b/c/d", None, None)),
    ("nvcr.io/nvidia/pytorch:24.05-py3", ("nvcr.io", "nvidia/pytorch", "24.05-py3", None)),
]


@pytest.mark.parametrize(("text", "expected"), PARSED)
def test_references_parse_fully_qualified(text: str, expected: tuple) -> None:
    ref = oci.parse(text)
    assert (ref.registry, ref.path, ref.tag, ref.digest) == expected
    assert oci.parse(str(ref)) == ref  # printing it and parsing again is stable


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Ubuntu",  # repositories are lowercase
        "ubuntu:",
        "ubuntu:-x",
        "ubuntu::1",
        "a//b",
        "/ubuntu",
        "ubuntu/",
        "a..b/c",
        "ubuntu@sha256:abc",  # digest too short
        "ubuntu@" + DIGEST + "@" + DIGEST,
        "ubuntu:" + "t" * 129,
        "x" * 256,
        "ubuntu latest",
        "ubuntu;rm -rf /",
        "-ubuntu",
        "registry.example.com:port/x",
    ],
)
def test_malformed_references_are_refused_with_the_grammar(text: str) -> None:
    with pytest.raises(InvalidInput, match=r"not an OCI image reference \(\[registry/\]"):
        oci.parse(text)


@pytest.mark.parametrize(
    ("entry", "checked"),
    [
        ("docker.io", "docker.io"),
        ("Registry.Example.com/team/", "registry.example.com/team"),
        ("localhost:5000", "localhost:5000"),
        ("localhost", "localhost"),
        ("docker.io/library", "docker.io/library"),
    ],
)
def test_registry_entries_are_checked(entry: str, checked: str) -> None:
    assert oci.registry_entry(entry) == checked


@pytest.mark.parametrize(
    "entry", ["", "dockerhub", "team/x", "docker.io/Team", "a..b", "http://x.io"]
)
def test_bad_registry_entries_are_refused(entry: str) -> None:
    with pytest.raises(ValueError, match="must be host"):
        oci.registry_entry(entry)


ALLOWED = ("docker.io/library", "registry.example.com/team", "localhost:5000")

# (image value, registries) → stored value, or None when refused
RESOLVED = [
    (None, (), "pytorch-2.3-cuda12.3"),
    ("deepspeed", (), "deepspeed"),
    ("ubuntu:24.04", (), None),
    ("ubuntu:24.04", ALLOWED, "docker.io/library/ubuntu:24.04"),
    ("docker.io/library/ubuntu", ALLOWED, "docker.io/library/ubuntu"),
    ("pytorch/pytorch:2.3.1", ALLOWED, None),  # docker.io/pytorch is not docker.io/library
    ("pytorch/pytorch:2.3.1", ("docker.io",), "docker.io/pytorch/pytorch:2.3.1"),
    ("registry.example.com/team/trainer:1", ALLOWED, "registry.example.com/team/trainer:1"),
    ("registry.example.com/team", ALLOWED, "registry.example.com/team"),
    ("registry.example.com/teammate/x", ALLOWED, None),  # whole components only
    ("registry.example.com/other/x", ALLOWED, None),
    ("registry.example.com:5000/team/x", ALLOWED, None),  # another port, another registry
    ("localhost:5000/mine@" + DIGEST, ALLOWED, "localhost:5000/mine@" + DIGEST),
    ("localhost/cardhour/deepspeed:latest", ALLOWED, None),  # localhost ≠ localhost:5000
    ("evil.example.com/docker.io/library/ubuntu", ALLOWED, None),
]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.mark.parametrize(("value", "registries", "stored"), RESOLVED)
def test_an_instances_image_resolves_by_the_catalog_and_the_allowed_registries(
    catalog: Catalog, value: str | None, registries: tuple[str, ...], stored: str | None
) -> None:
    fleet = replace(catalog, registries=registries)
    if stored is None:
        with pytest.raises(InvalidInput) as refused:
            fleet.launch_image(value)
        message = refused.value.message
        assert "available: pytorch-2.3-cuda12.3, llama-factory" in message
        allowed = ", ".join(registries) if registries else "only catalog images run"
        assert allowed in message and refused.value.details == {"field": "image"}
        with pytest.raises(InvalidInput):
            fleet.image_ref(value)
        return
    assert fleet.launch_image(value) == stored
    catalogued = {i.id: i.ref for i in catalog.images}
    assert fleet.image_ref(value) == catalogued.get(stored, stored)


def test_catalog_images_default_to_the_offline_stand_ins(catalog: Catalog) -> None:
    assert [i.ref for i in catalog.images] == [
        f"localhost/cardhour/{i.id}:latest" for i in catalog.images
    ]
    assert catalog.image_ref("megatron-lm") == "localhost/cardhour/megatron-lm:latest"
    assert catalog.registries == ()


def _fleet(**changes: object) -> dict:
    raw = yaml.safe_load(default_fleet_text())
    raw.update(changes)
    return raw


def test_the_fleet_file_sets_refs_and_registries() -> None:
    raw = _fleet(registries=["docker.io", "Registry.Example.com/team/"])
    raw["images"][1]["ref"] = "hiyouga/llamafactory:0.8.3"
    catalog = Catalog.from_file(CatalogFile.model_validate(raw))
    assert catalog.registries == ("docker.io", "registry.example.com/team")
    assert catalog.image_ref("llama-factory") == "docker.io/hiyouga/llamafactory:0.8.3"


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"registries": ["dockerhub"]}, "must be host"),
        ({"images": [{"id": "Big", "name": "x"}]}, "the default from its id: set `ref`"),
        ({"images": [{"id": "x", "name": "x", "ref": "a b"}]}, "not an OCI image reference"),
    ],
)
def test_the_fleet_file_refuses_bad_refs_and_registries(changes: dict, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        CatalogFile.model_validate(_fleet(**changes))


def test_command_limits() -> None:
    assert spec.check_command(None) is None
    assert spec.check_command("  ") is None
    assert spec.check_command("python -m http.server 8888") == "python -m http.server 8888"
    assert spec.check_command("x" * spec.MAX_COMMAND) == "x" * spec.MAX_COMMAND
    for bad, why in [("x" * (spec.MAX_COMMAND + 1), "at most 4096"), ("a\0b", "NUL")]:
        with pytest.raises(InvalidInput, match=f"^command: .*{why}"):
            spec.check_command(bad)


@pytest.mark.parametrize(
    ("env", "why"),
    [
        ({"1X": "v"}, "'1X' is not a variable name"),
        ({"A-B": "v"}, "'A-B' is not a variable name"),
        ({"": "v"}, "'' is not a variable name"),
        ({"X" * 256: "v"}, "'X{256}' is not a variable name"),
        ({"CARDHOUR_TOKEN": "v"}, "CARDHOUR_TOKEN is reserved"),
        ({"A": "x" * 4097}, "the value of A has 4097 characters, at most 4096"),
        ({"A": "a\0b"}, "the value of A contains a NUL"),
        ({"KEY": "-----BEGIN\nx"}, "the value of KEY contains a line break"),
        ({f"V{i}": "" for i in range(65)}, "65 variables, at most 64"),
    ],
)
def test_env_limits(env: dict[str, str], why: str) -> None:
    with pytest.raises(InvalidInput, match=f"^env: {why}"):
        spec.check_env(env)


def test_env_keeps_its_order_and_allows_lowercase_and_empty_values() -> None:
    env = {"Z": "1", "_a": "", "cardhour_mine": "x", **{f"V{i}": "" for i in range(61)}}
    assert list(spec.check_env(env)) == list(env) and len(env) == 64


@pytest.mark.parametrize(
    ("ports", "why"),
    [
        ([22], "22 is the instance's sshd"),
        ([0], "0 is not a port"),
        ([65536], "65536 is not a port"),
        ([True], "True is not a port"),
        ([8888, 8888], "8888 is listed twice"),
        (list(range(8000, 8017)), "17 ports, at most 16"),
    ],
)
def test_port_limits(ports: list[int], why: str) -> None:
    with pytest.raises(InvalidInput, match=f"^ports: {why}"):
        spec.check_ports(ports)
    assert spec.check_ports([8888, 1, 65535, *range(9000, 9013)]) == [
        8888,
        1,
        65535,
        *range(9000, 9013),
    ]
