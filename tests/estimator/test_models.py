"""Presets, the FLOPs formula, training modes."""

from __future__ import annotations

import pytest

from cardhour.core.errors import InvalidInput
from cardhour.estimator.models import DENSE_FACTOR, PRESETS, Mode, build_model, preset


@pytest.mark.parametrize(
    ("name", "params", "layers", "hidden", "attention_per_token"),
    [
        ("llama3-8b", 8_030_261_248, 32, 4096, 12 * 32 * 4096 * 8192),
        ("llama3-70b", 70_553_706_496, 80, 8192, 12 * 80 * 8192 * 8192),
        ("llama3.1-405b", 405_853_388_800, 126, 16384, 12 * 126 * 16384 * 8192),
    ],
)
def test_presets(
    name: str, params: int, layers: int, hidden: int, attention_per_token: int
) -> None:
    spec = preset(name)
    assert (spec.params, spec.layers, spec.hidden, spec.seq_len) == (params, layers, hidden, 8192)
    assert spec.heads is not None and spec.hidden == spec.heads * 128  # H·Q = d
    assert spec.attention_flops_per_token() == attention_per_token


def test_llama_parameter_counts_follow_from_the_configs() -> None:
    """N = layers × (attention + SwiGLU MLP + 2 norms) + 2 × vocabulary × d + final norm."""

    def count(d: int, layers: int, ffn: int, kv_heads: int = 8, vocab: int = 128_256) -> int:
        attention = 2 * d * d + 2 * d * kv_heads * 128
        return layers * (attention + 3 * d * ffn + 2 * d) + 2 * vocab * d + d

    assert preset("llama3-8b").params == count(4096, 32, 14_336)
    assert preset("llama3-70b").params == count(8192, 80, 28_672)
    assert preset("llama3.1-405b").params == count(16_384, 126, 53_248)


def test_405b_on_15_6t_tokens_is_meta_s_3_8e25_by_6nd() -> None:
    spec = preset("llama3.1-405b")
    flops_6nd = 6 * spec.params * 15_600_000_000_000
    assert abs(flops_6nd / 3.8e25 - 1) < 0.05
    assert spec.card is not None and spec.card.tokens == 15_600_000_000_000


@pytest.mark.parametrize(
    "query", ["llama3-70b", "Llama 3 70B", "LLAMA_3_70B", "meta-llama-3-70b", "llama-3-70b"]
)
def test_preset_names(query: str) -> None:
    assert preset(query).id == "llama3-70b"


def test_llama3_405b_alias_is_the_3_1_model() -> None:
    assert preset("llama3-405b").id == "llama3.1-405b"


def test_unknown_preset_names_the_presets() -> None:
    with pytest.raises(InvalidInput, match="llama3.1-405b"):
        preset("gpt-5")


def test_lora_is_two_thirds_of_the_dense_term() -> None:
    assert DENSE_FACTOR[Mode.LORA] * 3 == DENSE_FACTOR[Mode.FULL] * 2
    assert DENSE_FACTOR[Mode.FULL] == DENSE_FACTOR[Mode.PRETRAIN] == 6


def test_custom_and_overrides() -> None:
    custom = build_model(None, params=7 * 10**9)
    assert custom.attention_flops_per_token() == 0 and not custom.has_attention_term
    shaped = build_model(None, 7 * 10**9, 32, 4096, 4096)
    assert shaped.attention_flops_per_token() == 12 * 32 * 4096 * 4096
    short = build_model("llama3-8b", seq_len=2048)
    assert short.seq_len == 2048 and short.params == preset("llama3-8b").params
    assert short.card is None and short.heads == 32 and short.id == "llama3-8b-custom"
    assert build_model("llama3-8b", hidden=5120).heads is None
    assert build_model("llama3-8b") is preset("llama3-8b")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "--params"),
        ({"params": 0}, "parameters"),
        ({"params": 10, "layers": 10**6}, "layers"),
        ({"params": 10, "seq_len": 0}, "sequence length"),
    ],
)
def test_bad_models(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        build_model(None, **kwargs)


def test_every_preset_has_a_card_on_h100() -> None:
    assert all(p.card and p.card.gpu == "H100" for p in PRESETS)
