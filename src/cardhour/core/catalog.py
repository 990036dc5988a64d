"""The declarative catalog: GPU models, data centres, nodes, price book, images, and the
registries renters may run their own images from.

`CatalogFile` is the validated schema of the fleet YAML; `Catalog` is what the rest of the code
uses. Parsing YAML text is the caller's job (see `cardhour.settings.load_catalog`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cardhour.core.errors import InvalidInput, NotFound
from cardhour.core.gpus import GpuModel, resolve_model
from cardhour.core.money import Money
from cardhour.core.storage.volumes import Storage, StorageFile
from cardhour.core.topology import DataCentre, NodeSpec
from cardhour.core.workload import oci

HOURS_PER_MONTH = 720  # the monthly plan is 30 days


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GpuModelFile(_Strict):
    id: str
    name: str
    bf16_tflops: Decimal
    memory_gb: int = Field(gt=0)
    in_node_link: str
    in_node_gbps: int = Field(gt=0)
    nvlink: bool
    aliases: list[str] = []
    # the readiness gate's floor for all_reduce_perf's large-message busbw on one full node;
    # default: 26% of in_node_gbps (235 GB/s for 900, FACTS.md "Interconnect and nccl-tests")
    nccl_gate_gbps: Decimal | None = Field(default=None, gt=0)


class NodeGroupFile(_Strict):
    """`count` identical nodes named `<prefix>-NN`, `nodes_per_leaf` of them under each IB leaf."""

    prefix: str
    count: int = Field(gt=0, le=10_000)
    gpu_model: str
    gpus_per_node: int = Field(gt=0, le=16)
    cpus: int = Field(gt=0)
    memory_gb: int = Field(gt=0)
    ib_rails: int = Field(default=0, ge=0)
    ib_gbps_per_rail: int = Field(default=0, ge=0)
    nodes_per_leaf: int = Field(default=0, ge=0)
    leaves_per_spine: int = Field(default=8, gt=0)

    @model_validator(mode="after")
    def _ib_consistent(self) -> NodeGroupFile:
        if self.ib_rails and not self.nodes_per_leaf:
            raise ValueError(f"{self.prefix}: nodes with InfiniBand need nodes_per_leaf")
        return self


class DataCentreFile(_Strict):
    id: str
    name: str
    ownership: str = Field(pattern="^(owned|partner)$")
    region: str
    node_groups: list[NodeGroupFile]
    weights: list[str] = []  # model weights cached in this data centre (`model_weights` ids)


class WeightsFile(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]{0,62}$")
    name: str
    size_gb: int = Field(gt=0)


class PriceFile(_Strict):
    gpu_model: str
    data_centre: str | None = None  # None: every data centre
    on_demand: str  # CNY per card-hour, decimal string

    @field_validator("on_demand")
    @classmethod
    def _money(cls, value: str) -> str:
        if Money.parse(value).micros <= 0:
            raise ValueError("price must be positive")
        return value


class ImageFile(_Strict):
    id: str
    name: str
    description: str = ""
    versions: dict[str, str] = {}
    # the OCI reference a host runs; default `localhost/cardhour/<id>:latest` (`make images`
    # builds those offline as stand-ins)
    ref: str | None = None

    @property
    def oci_ref(self) -> str:
        """The reference, fully qualified (`core.workload.oci`); ValueError when malformed."""
        try:
            return str(oci.parse(self.ref or f"localhost/cardhour/{self.id}:latest"))
        except InvalidInput as exc:
            hint = "" if self.ref else " (the default from its id: set `ref`)"
            raise ValueError(f"image {self.id}: {exc.message}{hint}") from None


class CatalogFile(_Strict):
    currency: str = "CNY"
    monthly_discount_percent: int = Field(default=35, ge=0, lt=100)
    # the SLA: a request not ready within this many seconds gets its waiting time back
    sla_ready_within_seconds: int = Field(default=900, gt=0)
    model_weights: list[WeightsFile] = []
    # copying weights a data centre does not cache, in Gb/s (the quote's time estimate)
    weights_copy_gbps: int = Field(default=10, gt=0)
    gpu_models: list[GpuModelFile]
    data_centres: list[DataCentreFile]
    prices: list[PriceFile]
    images: list[ImageFile]
    # registries renters may run their own images from (`docker.io`,
    # `registry.example.com/team`); empty: only the catalog's images
    registries: list[str] = []
    storage: StorageFile = StorageFile()  # persistent volumes (`core.storage.volumes`)

    @field_validator("registries")
    @classmethod
    def _registries(cls, value: list[str]) -> list[str]:
        return [oci.registry_entry(entry) for entry in value]

    @model_validator(mode="after")
    def _references(self) -> CatalogFile:
        models = {m.id for m in self.gpu_models}
        dcs = {d.id for d in self.data_centres}
        for dc in self.data_centres:
            for group in dc.node_groups:
                if group.gpu_model not in models:
                    raise ValueError(
                        f"node group {group.prefix}: unknown gpu_model {group.gpu_model}"
                    )
        for price in self.prices:
            if price.gpu_model not in models:
                raise ValueError(f"price: unknown gpu_model {price.gpu_model}")
            if price.data_centre is not None and price.data_centre not in dcs:
                raise ValueError(f"price: unknown data_centre {price.data_centre}")
        if not self.images:
            raise ValueError("the image catalog is empty")
        for image in self.images:
            image.oci_ref  # noqa: B018 - raises for a malformed reference
        weights = {w.id for w in self.model_weights}
        for dc in self.data_centres:
            for cached in dc.weights:
                if cached not in weights:
                    raise ValueError(f"data centre {dc.id}: unknown model_weights {cached}")
        for dc_id in (*self.storage.prices, *self.storage.shared_paths):
            if dc_id not in dcs:
                raise ValueError(f"storage: unknown data_centre {dc_id}")
        return self


@dataclass(frozen=True)
class Weights:
    """Model weights the platform caches (Llama 3 70B, …), mounted read-only at `mount`."""

    id: str
    name: str
    size_gb: int

    @property
    def mount(self) -> str:
        return f"/models/{self.id}"


@dataclass(frozen=True)
class WeightsPlan:
    """Where an instance in `data_centre` gets its weights: local, or copied first."""

    weights: Weights
    data_centre: str
    local: bool
    copy_seconds: int  # 0 when local

    def detail(self) -> dict[str, object]:
        """As the readiness stages record it."""
        return {
            "id": self.weights.id,
            "mount": self.weights.mount,
            "local": self.local,
            "copy_seconds": self.copy_seconds,
        }


@dataclass(frozen=True)
class Image:
    id: str
    name: str
    description: str
    versions: dict[str, str]
    ref: str = ""  # the OCI reference it runs, fully qualified


@dataclass(frozen=True)
class PriceBook:
    """On-demand prices per card-hour by (model, data centre); the monthly plan is a discount."""

    entries: dict[tuple[str, str | None], Money]
    monthly_discount_percent: int

    def on_demand(self, gpu_model: str, data_centre: str) -> Money:
        price = self.entries.get((gpu_model, data_centre)) or self.entries.get((gpu_model, None))
        if price is None:
            raise NotFound(f"no price for {gpu_model} in {data_centre}")
        return price

    def monthly(self, gpu_model: str, data_centre: str) -> Money:
        """Per card-hour on the monthly plan."""
        return self.on_demand(gpu_model, data_centre).percent_off(self.monthly_discount_percent)


@dataclass(frozen=True)
class Catalog:
    currency: str
    gpu_models: list[GpuModel]
    data_centres: list[DataCentre]
    nodes: list[NodeSpec]
    prices: PriceBook
    images: list[Image] = field(default_factory=list)
    sla_ready_within_seconds: int = 900
    weights: list[Weights] = field(default_factory=list)
    weights_by_dc: dict[str, tuple[str, ...]] = field(default_factory=dict)
    weights_copy_gbps: int = 10
    registries: tuple[str, ...] = ()  # where renters' own images may come from
    storage: Storage = field(default_factory=lambda: Storage.from_file(StorageFile(), "CNY"))

    def model_weights(self, weights_id: str) -> Weights:
        """The weights of that id; InvalidInput naming the known ones otherwise."""
        for w in self.weights:
            if w.id == weights_id:
                return w
        known = ", ".join(w.id for w in self.weights) or "none"
        raise InvalidInput(f"unknown model weights {weights_id!r}; cached: {known}")

    def weights_plan(self, weights_id: str, data_centre: str) -> WeightsPlan:
        """Local when `data_centre` caches them; else copied at `weights_copy_gbps`."""
        w = self.model_weights(weights_id)
        if w.id in self.weights_by_dc.get(data_centre, ()):
            return WeightsPlan(w, data_centre, True, 0)
        seconds = -(-w.size_gb * 8 // self.weights_copy_gbps)  # GB → Gb, rounded up
        return WeightsPlan(w, data_centre, False, seconds)

    def dcs_with(self, weights_id: str) -> list[str]:
        return sorted(dc for dc, cached in self.weights_by_dc.items() if weights_id in cached)

    def model(self, query: str) -> GpuModel:
        return resolve_model(self.gpu_models, query)

    def model_by_id(self, model_id: str) -> GpuModel:
        return next(m for m in self.gpu_models if m.id == model_id)

    def node(self, node_id: str) -> NodeSpec:
        """The node of that id; NotFound for one the fleet file does not declare."""
        for spec in self.nodes:
            if spec.id == node_id:
                return spec
        raise NotFound(f"no node {node_id!r} in the fleet")

    def image(self, image_id: str | None) -> Image:
        if image_id is None:
            return self.images[0]
        for image in self.images:
            if image.id == image_id:
                return image
        known = ", ".join(i.id for i in self.images)
        raise InvalidInput(f"unknown image {image_id!r}; available: {known}")

    def launch_image(self, value: str | None) -> str:
        """What an instance records as its `image`: a catalog id as it is (None: the default
        image's), anything else as the fully qualified OCI reference of an allowed registry.
        InvalidInput naming the catalog's images and the allowed registries otherwise."""
        if value is None:
            return self.image(None).id
        if any(image.id == value for image in self.images):
            return value
        known = ", ".join(i.id for i in self.images)
        unknown = f"unknown image {value!r}: not in the catalog (available: {known})"
        try:
            reference = oci.parse(value)
        except InvalidInput:
            raise InvalidInput(
                f"{unknown} and not an OCI image reference ({oci.GRAMMAR})", field="image"
            ) from None
        if oci.allowed_by(reference, self.registries) is None:
            allowed = (
                f"allowed registries: {', '.join(self.registries)}"
                if self.registries
                else "this fleet allows no registries: only catalog images run"
            )
            raise InvalidInput(
                f"{unknown}, and {reference.repository} is not from an allowed registry "
                f"({allowed})",
                field="image",
            )
        return str(reference)

    def image_ref(self, value: str | None) -> str:
        """The OCI reference an instance's `image` runs: a catalog id's `ref`, else the value
        itself fully qualified, when its registry is allowed (`launch_image`'s errors else)."""
        found = self.launch_image(value)
        for image in self.images:
            if image.id == found:
                return image.ref
        return found

    def data_centre(self, dc_id: str) -> DataCentre:
        return next(d for d in self.data_centres if d.id == dc_id)

    @classmethod
    def from_file(cls, spec: CatalogFile) -> Catalog:
        models = [
            GpuModel(
                id=m.id,
                name=m.name,
                bf16_tflops=m.bf16_tflops,
                memory_gb=m.memory_gb,
                in_node_link=m.in_node_link,
                in_node_gbps=m.in_node_gbps,
                nvlink=m.nvlink,
                aliases=tuple(m.aliases),
                nccl_gate_gbps=m.nccl_gate_gbps,
            )
            for m in spec.gpu_models
        ]
        dcs = [DataCentre(d.id, d.name, d.ownership, d.region) for d in spec.data_centres]
        nodes = [node for d in spec.data_centres for g in d.node_groups for node in _expand(d, g)]
        ids = [n.id for n in nodes]
        if len(ids) != len(set(ids)):
            raise InvalidInput("node ids in the fleet file are not unique")
        prices = PriceBook(
            {
                (p.gpu_model, p.data_centre): Money.parse(p.on_demand, spec.currency)
                for p in spec.prices
            },
            spec.monthly_discount_percent,
        )
        images = [
            Image(i.id, i.name, i.description, dict(i.versions), i.oci_ref) for i in spec.images
        ]
        return cls(
            spec.currency,
            models,
            dcs,
            nodes,
            prices,
            images,
            spec.sla_ready_within_seconds,
            [Weights(w.id, w.name, w.size_gb) for w in spec.model_weights],
            {d.id: tuple(d.weights) for d in spec.data_centres},
            spec.weights_copy_gbps,
            tuple(spec.registries),
            Storage.from_file(spec.storage, spec.currency),
        )


def _expand(dc: DataCentreFile, group: NodeGroupFile) -> list[NodeSpec]:
    nodes = []
    for i in range(group.count):
        leaf = spine = None
        if group.ib_rails:
            leaf_no = i // group.nodes_per_leaf
            leaf = f"{dc.id}-{group.prefix}-leaf{leaf_no + 1}"
            spine = f"{dc.id}-{group.prefix}-spine{leaf_no // group.leaves_per_spine + 1}"
        nodes.append(
            NodeSpec(
                id=f"{dc.id}-{group.prefix}-{i + 1:02d}",
                data_centre=dc.id,
                gpu_model=group.gpu_model,
                gpu_count=group.gpus_per_node,
                cpus=group.cpus,
                memory_gb=group.memory_gb,
                ib_leaf=leaf,
                ib_spine=spine,
                ib_rails=group.ib_rails,
                ib_gbps_per_rail=group.ib_gbps_per_rail,
            )
        )
    return nodes
