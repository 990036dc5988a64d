"""The RAG demo app's embedder (examples/apps/rag-search/minilm.py) is all-MiniLM-L6-v2: the
similarities sentence-transformers' README prints for this model's embeddings of three
sentences, to its four decimals; and its tokenizer splits as BERT's uncased WordPiece does."""

from __future__ import annotations

import json
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

APP = Path(__file__).resolve().parents[2] / "examples" / "apps" / "rag-search"


@pytest.fixture(scope="module")
def minilm() -> Iterator[ModuleType]:
    sys.path.insert(0, str(APP))
    try:
        import minilm as module

        yield module
    finally:
        sys.path.remove(str(APP))
        sys.modules.pop("minilm", None)


def test_the_similarities_sentence_transformers_publishes(minilm: ModuleType) -> None:
    model = minilm.Embedder()
    vectors = model.encode(
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    )
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    published = np.array([[1.0, 0.6660, 0.1046], [0.6660, 1.0, 0.1411], [0.1046, 0.1411, 1.0]])
    assert np.abs(vectors @ vectors.T - published).max() < 5e-5
    # run together (padded to the longest, padding masked) or one by one: the same vectors
    alone = model.encode(
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."],
        batch=1,
    )
    assert np.abs(alone - vectors).max() < 1e-5


@pytest.fixture(scope="module")
def wordpiece(minilm: ModuleType) -> object:
    with zipfile.ZipFile(minilm.model_zip()) as z:
        return minilm.WordPiece(json.loads(z.read("tokenizer.json")))


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("It's so sunny outside!", ["it", "'", "s", "so", "sunny", "outside", "!"]),
        ("Café NAÏVE", ["cafe", "naive"]),  # lowercased, accents stripped
        ("東京 GPUs", ["東", "京", "gp", "##us"]),  # CJK one by one, word pieces
        ("a\u0000b\tc", ["ab", "c"]),  # control characters dropped, tabs split
    ],
)
def test_the_tokenizer(wordpiece: Any, text: str, tokens: list[str]) -> None:
    by_id = {i: t for t, i in wordpiece.vocab.items()}
    assert [by_id[i] for i in wordpiece.ids(text)] == ["[CLS]", *tokens, "[SEP]"]
