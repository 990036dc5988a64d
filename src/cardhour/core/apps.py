"""The AI app marketplace's pure rules: the app manifest, the review states, the revenue split.

A manifest (YAML or JSON, `cardhour-app.yaml` in the package) says what an app is and how it
runs:

    name: Document search            # shown in the marketplace
    slug: doc-search                 # its address: /api/v1/apps/doc-search/invoke
    category: rag                    # one of CATEGORIES
    description: Multimodal RAG over a small document set.
    price_per_call: "0.02"           # in the deployment's currency, at most 6 decimals
    entrypoint: app:handle           # module:function in the package, served over HTTP
    requirements: [sentence-transformers==3.0.1]
    input_schema: {type: object, properties: {query: {type: string}}, required: [query]}
    output_schema: {type: object}
    resources: {gpu: H100, milli_gpu: 250, memory_gb: 8}   # no `gpu`: a CPU app
    scaling: {min_replicas: 0, max_replicas: 4, target_concurrency: 4, idle_seconds: 300}

`parse_manifest` checks every field and says which one is wrong ("resources.milli_gpu: ...").

Review states (`review`): draft → in_review → listed or rejected (with a reason); listed →
delisted; a rejected or delisted app goes back to review when its developer submits again.

Revenue split (`split`): each successful call's price is split between the developer and the
platform; the developer's share is rounded down to the micro-unit and the platform takes the
remainder, so the two always add up to the price exactly (70/30 by default: 0.000001 → 0 and
0.000001; 0.02 → 0.014 and 0.006).
"""

from __future__ import annotations

import io
import re
import zipfile
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cardhour.core.errors import InvalidInput, InvalidTransition

CATEGORIES = (
    "text-generation",
    "text-to-image",
    "image-restoration",
    "speech",
    "video",
    "rag",
    "multimodal",
    "other",
)
SLUG = re.compile(r"[a-z0-9]([a-z0-9-]{1,46}[a-z0-9])")
ENTRYPOINT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*")
MAX_PRICE = Decimal("1000")
BASIS_POINTS = 10_000
DEFAULT_DEVELOPER_SHARE_BP = 7_000  # 70% to the developer, 30% to the platform


#: the CPU each replica is placed with on the fleet and limited to in its container (one core)
REPLICA_CPU_MILLI = 1000


class Resources(BaseModel):
    """Per replica (besides `REPLICA_CPU_MILLI` of CPU). `milli_gpu`: a fraction of one GPU
    (1-999) or whole GPUs (1000, 2000, …)."""

    model_config = ConfigDict(extra="forbid")

    gpu: str | None = None
    milli_gpu: int = Field(default=0, ge=0, le=8000)
    memory_gb: int = Field(default=4, ge=1, le=1024)

    @field_validator("milli_gpu")
    @classmethod
    def _shape(cls, value: int) -> int:
        if value > 1000 and value % 1000:
            raise ValueError("more than one GPU must be whole GPUs (a multiple of 1000)")
        return value


class Scaling(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min_replicas: int = Field(default=0, ge=0, le=64)
    max_replicas: int = Field(default=2, ge=1, le=64)
    target_concurrency: int = Field(default=4, ge=1, le=1000)
    idle_seconds: int = Field(default=300, ge=30, le=86_400)


class AppManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=80)
    slug: str
    category: str
    description: str = Field(min_length=1, max_length=2000)
    price_per_call: str
    entrypoint: str
    requirements: list[str] = Field(default_factory=list, max_length=50)
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    resources: Resources = Field(default_factory=Resources)
    scaling: Scaling = Field(default_factory=Scaling)

    @field_validator("slug")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG.fullmatch(value):
            raise ValueError(
                "3-48 lowercase letters, digits and '-', not starting or ending with '-'"
            )
        return value

    @field_validator("category")
    @classmethod
    def _category(cls, value: str) -> str:
        if value not in CATEGORIES:
            raise ValueError(f"one of {', '.join(CATEGORIES)}")
        return value

    @field_validator("price_per_call")
    @classmethod
    def _price(cls, value: str) -> str:
        try:
            price = Decimal(str(value))
        except InvalidOperation:
            raise ValueError('a decimal amount such as "0.02"') from None
        if not price.is_finite() or price <= 0 or price > MAX_PRICE:
            raise ValueError(f"more than 0 and at most {MAX_PRICE}")
        if price != price.quantize(Decimal("0.000001")):
            raise ValueError("at most 6 decimals (the ledger's micro-unit)")
        return str(price)

    @field_validator("entrypoint")
    @classmethod
    def _entrypoint(cls, value: str) -> str:
        if not ENTRYPOINT.fullmatch(value):
            raise ValueError("module:function, e.g. app:handle")
        return value

    @field_validator("requirements")
    @classmethod
    def _requirements(cls, value: list[str]) -> list[str]:
        for line in value:
            if not line.strip() or line.lstrip().startswith(("-", "/", ".")) or "://" in line:
                raise ValueError(f"{line!r}: package requirements only (no options, paths or URLs)")
        return value

    @field_validator("input_schema", "output_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError("a JSON Schema whose type is object")
        return value

    @property
    def price_micros(self) -> int:
        return int(Decimal(self.price_per_call) * 1_000_000)

    def check_scaling(self) -> None:
        if self.scaling.min_replicas > self.scaling.max_replicas:
            raise InvalidInput(
                "scaling: min_replicas is more than max_replicas", field="scaling.min_replicas"
            )
        if self.resources.milli_gpu and self.resources.gpu is None:
            raise InvalidInput("resources: milli_gpu needs a gpu model", field="resources.gpu")


def parse_manifest(text: str) -> AppManifest:
    """A manifest from YAML (or JSON, which is YAML); InvalidInput naming the first bad field."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidInput(f"manifest is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(raw, dict):
        raise InvalidInput("manifest must be a mapping of fields")
    try:
        manifest = AppManifest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "manifest"
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InvalidInput(f"{where}: {message}", field=where) from None
    manifest.check_scaling()
    return manifest


class AppStatus(StrEnum):
    DRAFT = "draft"
    IN_REVIEW = "in_review"
    LISTED = "listed"
    REJECTED = "rejected"
    DELISTED = "delisted"


#: (from, action) → to. Actions: the developer's `submit`, the operator's `approve`, `reject`,
#: `delist`.
REVIEW: dict[tuple[AppStatus, str], AppStatus] = {
    (AppStatus.DRAFT, "submit"): AppStatus.IN_REVIEW,
    (AppStatus.REJECTED, "submit"): AppStatus.IN_REVIEW,
    (AppStatus.DELISTED, "submit"): AppStatus.IN_REVIEW,
    (AppStatus.IN_REVIEW, "approve"): AppStatus.LISTED,
    (AppStatus.IN_REVIEW, "reject"): AppStatus.REJECTED,
    (AppStatus.LISTED, "delist"): AppStatus.DELISTED,
}


def review(current: str, action: str) -> AppStatus:
    """The status after `action`; InvalidTransition when it does not apply."""
    try:
        return REVIEW[(AppStatus(current), action)]
    except (KeyError, ValueError):
        raise InvalidTransition(f"an app that is {current} cannot be {action}ed") from None


def split(price_micros: int, developer_bp: int = DEFAULT_DEVELOPER_SHARE_BP) -> tuple[int, int]:
    """(developer, platform) shares of a call's price, in micro-units: the developer's rounded
    down, the platform's the remainder."""
    if price_micros < 0 or not 0 <= developer_bp <= BASIS_POINTS:
        raise ValueError("a price ≥ 0 and a share between 0 and 10000 basis points")
    developer = price_micros * developer_bp // BASIS_POINTS
    return developer, price_micros - developer


#: the manifest's file name in an app's folder (the rest of the folder is its code)
MANIFEST_FILE = "cardhour-app.yaml"


def pack(files: dict[str, bytes]) -> bytes:
    """An app's code as the zip an upload carries, from its files (relative path → content);
    in memory, deterministic (sorted, fixed timestamps), so the same code has the same hash."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name in sorted(files):
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), files[name])
    return out.getvalue()


def code_files(names: list[str]) -> list[str]:
    """Which of an app folder's files (relative POSIX paths) are its code: not the manifest,
    no caches."""
    return [n for n in names if n != MANIFEST_FILE and "__pycache__" not in n.split("/")]
