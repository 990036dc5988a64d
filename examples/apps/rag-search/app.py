"""Multimodal document search (retrieval for RAG) over a GPU cloud's help centre: text passages
(docs.json) and image documents (images/*.png: a scanned price sheet, a slide, a network
diagram), whose text is read out of the pixels with Debian's tesseract-ocr when the replica
starts. Everything is embedded with all-MiniLM-L6-v2 (minilm.py: the real model, in numpy, from
a PyPI package).

A query is text (`query`), an image (`image_b64`: a PNG or JPEG, e.g. a screenshot of an error,
read with tesseract), or both. It returns the `top_k` most similar documents with their cosine
scores (an image document names its file), and an extractive answer: the sentence most similar
to the query in the documents that score within `ANSWER_MARGIN` of the best. There is no generator model: the caller's LLM gets the
passages as context. Without tesseract the text documents and text queries still work; image
documents are left out and image queries are refused with the reason."""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
from minilm import Embedder

HERE = Path(__file__).parent
MAX_IMAGE_BYTES = 4_000_000
MAX_PIXELS = 25_000_000  # a small file can decode to gigabytes
OCR_MEMORY = 1 << 30
OCR_SECONDS = 20
OCR_TURN = threading.BoundedSemaphore(1)
ANSWER_MARGIN = 0.1
IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff")
TESSERACT = shutil.which("tesseract")
# util-linux's prlimit bounds tesseract's memory (a preexec_fn is unsafe in this threaded server)
LIMIT = ["prlimit", f"--as={OCR_MEMORY}"] if shutil.which("prlimit") else []


def image_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR or a JPEG's start-of-frame; ValueError otherwise."""
    if data.startswith(IMAGE_MAGIC[0]) and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    i = 2
    while data.startswith(IMAGE_MAGIC[1]) and i + 9 <= len(data) and data[i] == 0xFF:
        marker, length = data[i + 1], int.from_bytes(data[i + 2 : i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a frame header
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    raise ValueError("image_b64: a PNG or JPEG image")


def ocr(path: Path) -> str:
    """The text tesseract reads in an image, one line per line of text, blank lines dropped.
    One image at a time per replica, on one thread, in `OCR_MEMORY` bytes and `OCR_SECONDS`."""
    assert TESSERACT is not None
    if not OCR_TURN.acquire(timeout=OCR_SECONDS):
        raise ValueError("image: the replica is busy reading other images; retry")
    try:
        done = subprocess.run(
            [*LIMIT, TESSERACT, str(path), "stdout"], capture_output=True, timeout=OCR_SECONDS,
            env={**os.environ, "OMP_THREAD_LIMIT": "1"},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise ValueError(f"image: reading it took over {OCR_SECONDS} s") from None
    finally:
        OCR_TURN.release()
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip()[-200:]
        raise ValueError(f"image: tesseract could not read it ({reason})")
    lines = (line.strip() for line in done.stdout.decode("utf-8", "replace").splitlines())
    return "\n".join(line for line in lines if line)


def image_document(path: Path) -> dict:
    """An image as a document: its first line of text is the title, the rest the text; its
    answer units are its lines, a line that continues a sentence (lower case, after a line
    without a full stop) joined to the one before (table rows and list items stay apart)."""
    title, *lines = ocr(path).splitlines() or [""]
    units: list[str] = []
    for line in lines:
        if units and line[0].islower() and units[-1][-1] not in ".!?:;":
            units[-1] += " " + line
        else:
            units.append(line)
    return {"id": path.stem, "title": title, "text": " ".join(units), "image": path.name,
            "units": units}  # fmt: skip


def answer_units(doc: dict) -> list[str]:
    """The sentences a document's answer is chosen from."""
    units = doc.get("units", [doc["text"]])
    return [s for unit in units for s in re.split(r"(?<=[.!?])\s+", unit) if len(s) > 3]


DOCS = json.loads((HERE / "docs.json").read_text())
if TESSERACT is not None:
    for png in sorted((HERE / "images").glob("*.png")):
        doc = image_document(png)
        if doc["title"]:
            DOCS.append(doc)
        else:
            print(f"rag-search: no text found in {png.name}; left out", file=sys.stderr)
MODEL = Embedder()
PASSAGES = MODEL.encode([f"{d['title']}. {d['text']}" for d in DOCS])
SENTENCES = [(i, s) for i, d in enumerate(DOCS) for s in answer_units(d)]
SENTENCE_VECTORS = MODEL.encode([s for _, s in SENTENCES])


def read_query_image(encoded: object) -> str:
    if not isinstance(encoded, str):
        raise ValueError("image_b64: a base64 string")
    if TESSERACT is None:
        raise ValueError("image_b64: image queries need tesseract (apt-get install tesseract-ocr)")
    if len(encoded) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        raise ValueError(f"image_b64: at most {MAX_IMAGE_BYTES // 1_000_000} MB")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("image_b64: not valid base64") from None
    width, height = image_size(data)
    if not 0 < width * height <= MAX_PIXELS:
        raise ValueError(f"image_b64: {width}×{height} pixels; at most {MAX_PIXELS // 10**6} MP")
    with tempfile.NamedTemporaryFile(suffix=".img") as f:
        f.write(data)
        f.flush()
        text = " ".join(ocr(Path(f.name)).split())
    if not text:
        raise ValueError("image_b64: no text found in the image")
    return text


def handle(request: dict) -> dict:
    query = request.get("query")
    if query is not None and (not isinstance(query, str) or not query.strip()):
        raise ValueError("query: a non-empty string")
    image = request.get("image_b64") or None  # "" (an empty form field): no image
    image_text = None if image is None else read_query_image(image)
    if query is None and image_text is None:
        raise ValueError("query: a non-empty string (or image_b64: a PNG or JPEG)")
    top_k = request.get("top_k", 3)
    if not isinstance(top_k, int) or not 1 <= top_k <= len(DOCS):
        raise ValueError(f"top_k: an integer from 1 to {len(DOCS)}")
    text = " ".join(t[:2000] for t in (query, image_text) if t)
    q = MODEL.encode([text])[0]
    scores = PASSAGES @ q
    best = [int(i) for i in np.argsort(-scores)[:top_k]]
    chosen = {i for i in best if scores[i] >= scores[best[0]] - ANSWER_MARGIN}
    answer, answer_score = "", -1.0
    for (doc, sentence), vector in zip(SENTENCES, SENTENCE_VECTORS):
        score = float(vector @ q)
        if doc in chosen and score > answer_score:
            answer, answer_score = sentence, score
    hits = []
    for i in best:
        doc = DOCS[i]
        hit = {"id": doc["id"], "title": doc["title"], "text": doc["text"],
               "kind": "image" if "image" in doc else "text", "score": round(float(scores[i]), 4)}
        if "image" in doc:
            hit["image"] = f"images/{doc['image']}"
        hits.append(hit)  # fmt: skip
    out = {"hits": hits, "answer": answer, "answer_score": round(answer_score, 4)}
    if image_text is not None:
        out["image_text"] = image_text
    return out
