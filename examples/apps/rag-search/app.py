"""Document search (retrieval for RAG): a GPU cloud's help centre (docs.json), embedded with
all-MiniLM-L6-v2 (minilm.py: the real model, in numpy, from a PyPI package). A query returns the
`top_k` most similar passages with their cosine scores, and an extractive answer: the sentence
of those passages most similar to the query. There is no generator model: the caller's LLM
gets the passages as context."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from minilm import Embedder

DOCS = json.loads((Path(__file__).parent / "docs.json").read_text())
MODEL = Embedder()
PASSAGES = MODEL.encode([f"{d['title']}. {d['text']}" for d in DOCS])
SENTENCES = [(i, s) for i, d in enumerate(DOCS) for s in re.split(r"(?<=[.!?])\s+", d["text"]) if s]
SENTENCE_VECTORS = MODEL.encode([s for _, s in SENTENCES])


def handle(request: dict) -> dict:
    query = request.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query: a non-empty string")
    top_k = request.get("top_k", 3)
    if not isinstance(top_k, int) or not 1 <= top_k <= len(DOCS):
        raise ValueError(f"top_k: an integer from 1 to {len(DOCS)}")
    q = MODEL.encode([query[:2000]])[0]
    scores = PASSAGES @ q
    best = [int(i) for i in np.argsort(-scores)[:top_k]]
    chosen = set(best)
    answer, answer_score = "", -1.0
    for (doc, sentence), vector in zip(SENTENCES, SENTENCE_VECTORS):
        score = float(vector @ q)
        if doc in chosen and score > answer_score:
            answer, answer_score = sentence, score
    hits = [
        {"id": DOCS[i]["id"], "title": DOCS[i]["title"], "text": DOCS[i]["text"],
         "score": round(float(scores[i]), 4)}
        for i in best
    ]  # fmt: skip
    return {"hits": hits, "answer": answer, "answer_score": round(answer_score, 4)}
