"""Model presets, training modes and the FLOPs formula.

Training FLOPs per token = k·N + 12·L·H·Q·T (PaLM appendix B; nanoGPT `estimate_mfu`):
- k·N is the dense term: 2N for the forward pass and 4N for the backward pass, k = 6 for
  pre-training and full fine-tuning. LoRA freezes the base weights, so the backward pass still
  computes the activation gradients (2N) but not the weight gradients (2N): k = 4, a compute
  fraction of 4/6 = 2/3 of the dense term. The adapters' own FLOPs (6 × their parameters, well
  under 1% of N at the usual ranks) are left out.
- 12·L·H·Q·T is the attention term (the QKᵀ and AV matmuls, which have no weights): L layers,
  H heads of Q dimensions (H·Q = the hidden size d), sequence length T. It is the same in every
  mode: LoRA still back-propagates through attention.
N counts every parameter, embeddings included (the usual "6·N·D"; the input embedding is a
lookup, so this overstates by 6 × vocabulary × d per token, 0.5% for Llama 3.1 405B).
Everything here is an exact integer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from decimal import Decimal
from enum import StrEnum

from cardhour.core.errors import InvalidInput

MAX_PARAMS = 10**15
MAX_TOKENS = 10**18
MAX_LAYERS = 10_000
MAX_HIDDEN = 1_000_000
MAX_SEQ_LEN = 10_000_000


class Mode(StrEnum):
    PRETRAIN = "pretrain"
    FULL = "full"  # full fine-tuning: the same compute per token as pre-training
    LORA = "lora"


#: k in k·N per token, by mode (see the module docstring for the derivation).
DENSE_FACTOR: dict[Mode, int] = {Mode.PRETRAIN: 6, Mode.FULL: 6, Mode.LORA: 4}


@dataclass(frozen=True)
class CardFigure:
    """What a model card publishes about the training run, for `--check`."""

    gpu_hours: Decimal
    tokens: int
    gpu: str
    source: str


@dataclass(frozen=True)
class ModelSpec:
    """A dense transformer. Without `layers`/`hidden`/`seq_len` the attention term is 0."""

    id: str
    name: str
    params: int
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    seq_len: int | None = None
    source: str = "custom"
    card: CardFigure | None = None
    aliases: tuple[str, ...] = ()

    @property
    def has_attention_term(self) -> bool:
        return bool(self.layers and self.hidden and self.seq_len)

    def attention_flops_per_token(self) -> int:
        """12·L·H·Q·T with H·Q = d; 0 when the shape is not known."""
        if not self.has_attention_term:
            return 0
        assert self.layers and self.hidden and self.seq_len
        return 12 * self.layers * self.hidden * self.seq_len


def _card(hours: str, tokens: int, source: str) -> CardFigure:
    return CardFigure(Decimal(hours), tokens, "H100", source)


_L3 = "Llama 3 model card (meta-llama/llama3 MODEL_CARD.md): H100-80GB GPU-hours, 15T+ tokens"
_L31 = "Llama 3.1 model card (meta-llama/llama-models MODEL_CARD.md): H100-80GB GPU-hours"
_SHAPE = "parameters, layers, hidden size and heads from the models' config.json (8k context)"

#: Parameter counts are the exact counts of the released weights (embeddings and output layer
#: included, untied): they follow from the configs (vocabulary 128,256, GQA with 8 KV heads).
PRESETS: tuple[ModelSpec, ...] = (
    ModelSpec(
        "llama3-8b", "Llama 3 8B", 8_030_261_248, 32, 4096, 32, 8192, _SHAPE,
        _card("1300000", 15 * 10**12, _L3), ("llama-3-8b", "meta-llama-3-8b"),
    ),
    ModelSpec(
        "llama3-70b", "Llama 3 70B", 70_553_706_496, 80, 8192, 64, 8192, _SHAPE,
        _card("6400000", 15 * 10**12, _L3), ("llama-3-70b", "meta-llama-3-70b"),
    ),
    ModelSpec(
        "llama3.1-8b", "Llama 3.1 8B", 8_030_261_248, 32, 4096, 32, 8192, _SHAPE,
        _card("1460000", 15 * 10**12, _L31 + ", about 15T tokens"), ("llama-3.1-8b",),
    ),
    ModelSpec(
        "llama3.1-70b", "Llama 3.1 70B", 70_553_706_496, 80, 8192, 64, 8192, _SHAPE,
        _card("7000000", 15 * 10**12, _L31 + ", about 15T tokens"), ("llama-3.1-70b",),
    ),
    ModelSpec(
        "llama3.1-405b", "Llama 3.1 405B", 405_853_388_800, 126, 16384, 128, 8192, _SHAPE,
        _card("30840000", 15_600_000_000_000, _L31 + ", 15.6T tokens, 3.8e25 FLOPs"),
        ("llama3-405b", "llama-3.1-405b"),
    ),
)  # fmt: skip


def _norm(text: str) -> str:
    return re.sub(r"[\s_\-]", "", text).lower()


def preset(query: str) -> ModelSpec:
    """The preset named `query` (id or alias, case and dashes ignored); InvalidInput otherwise."""
    q = _norm(query)
    for spec in PRESETS:
        if q in {_norm(spec.id), _norm(spec.name), *(_norm(a) for a in spec.aliases)}:
            return spec
    known = ", ".join(p.id for p in PRESETS)
    raise InvalidInput(f"unknown model {query!r}; presets: {known} (or give --params)")


def _bounded(value: int | None, what: str, maximum: int) -> int | None:
    if value is not None and not 1 <= value <= maximum:
        raise InvalidInput(f"{what} must be between 1 and {maximum:,}, got {value}")
    return value


def build_model(
    name: str | None,
    params: int | None = None,
    layers: int | None = None,
    hidden: int | None = None,
    seq_len: int | None = None,
) -> ModelSpec:
    """A preset (`name`), a preset with its shape overridden, or a custom model (`params`).

    Raises InvalidInput when neither a preset nor a parameter count is given, or a value is out
    of range.
    """
    _bounded(params, "parameters", MAX_PARAMS)
    _bounded(layers, "layers", MAX_LAYERS)
    _bounded(hidden, "hidden size", MAX_HIDDEN)
    _bounded(seq_len, "sequence length", MAX_SEQ_LEN)
    if name:
        base = preset(name)
        if params is None and layers is None and hidden is None and seq_len is None:
            return base
        return replace(
            base,
            id=f"{base.id}-custom",
            name=f"{base.name} (custom)",
            params=params or base.params,
            layers=layers or base.layers,
            hidden=hidden or base.hidden,
            heads=base.heads if hidden is None else None,  # heads no longer split a new size
            seq_len=seq_len or base.seq_len,
            source="preset with overrides",
            card=None,
        )
    if params is None:
        raise InvalidInput("give --model PRESET or --params N (e.g. --params 7B)")
    return ModelSpec("custom", "custom model", params, layers, hidden, None, seq_len)
