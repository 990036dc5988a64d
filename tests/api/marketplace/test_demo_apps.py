"""The demo apps in examples/apps really do their job on the CPU, published, listed and called
through the gateway like any app (both databases): multimodal document search for RAG
(all-MiniLM-L6-v2 from a PyPI package, in numpy; images read with Debian's tesseract-ocr),
image restoration (median denoise, bilinear 2× upscale) and text to speech (Debian's
espeak-ng). `make system-deps` installs both Debian packages."""

from __future__ import annotations

import base64
import io
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from tests.api.marketplace.test_marketplace import _admin
from tests.conftest import Api

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "apps"


def _publish(api: Api, name: str) -> dict[str, str]:
    folder = EXAMPLES / name
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.name != "cardhour-app.yaml":
                z.write(path, path.relative_to(folder).as_posix())
    dev, admin, caller = api.signup(), _admin(api), api.signup()
    body = {
        "manifest": (folder / "cardhour-app.yaml").read_text(),
        "code_b64": base64.b64encode(out.getvalue()).decode(),
    }
    r = api.client.post("/api/v1/apps", headers=dev, json=body)
    assert r.status_code == 201, r.text
    slug = r.json()["slug"]
    api.client.post(f"/api/v1/apps/{slug}/submit", headers=dev)
    assert api.client.post(f"/api/v1/admin/apps/{slug}/approve", headers=admin, json={}).is_success
    api.top_up(caller, "5")
    return caller


def _pgm(image: np.ndarray) -> str:
    h, w = image.shape
    return base64.b64encode(f"P5\n{w} {h}\n255\n".encode() + image.tobytes()).decode()


def test_image_restoration_removes_salt_and_pepper_noise(api: Api) -> None:
    caller = _publish(api, "image-restore")
    clean = np.tile(np.linspace(0, 255, 64).astype(np.uint8), (48, 1))  # a smooth gradient
    noisy = clean.copy()
    rng = np.random.default_rng(7)
    spots = rng.choice(clean.size, size=clean.size // 20, replace=False)
    noisy.flat[spots] = rng.choice([0, 255], size=spots.size)
    r = api.client.post(
        "/api/v1/apps/image-restore/invoke",
        headers=caller,
        json={"pgm_b64": _pgm(noisy), "upscale": True},
    )
    assert r.status_code == 200, r.text
    out = r.json()["output"]
    assert (out["width"], out["height"]) == (128, 96) and out["changed_pixels"] > 0
    raw = base64.b64decode(out["pgm_b64"])
    restored = np.frombuffer(raw.split(b"255\n", 1)[1], dtype=np.uint8).reshape(96, 128)
    before = np.abs(noisy.astype(int) - clean).mean()
    after = np.abs(restored[::2, ::2].astype(int) - clean).mean()
    assert after < before / 5, (before, after)  # the noise is gone, the gradient kept


def test_text_to_speech_speaks(api: Api) -> None:
    caller = _publish(api, "tts")
    r = api.client.post(
        "/api/v1/apps/tts/invoke", headers=caller, json={"text": "Your cluster is ready."}
    )
    assert r.status_code == 200, r.text
    out = r.json()["output"]
    wav = base64.b64decode(out["wav_b64"])
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"
    assert 0.5 < out["seconds"] < 10
    bad = api.client.post(
        "/api/v1/apps/tts/invoke", headers=caller, json={"text": "x", "voice": "en; rm -rf /"}
    )
    assert bad.status_code == 502 and "voice" in bad.json()["error"]["message"]


def _search(api: Api, caller: dict[str, str], body: dict[str, object]) -> dict[str, Any]:
    r = api.client.post("/api/v1/apps/rag-search/invoke", headers=caller, json=body)
    assert r.status_code == 200, r.text
    return r.json()["output"]  # type: ignore[no-any-return]


def test_document_search_answers_text_and_image_queries(api: Api) -> None:
    caller = _publish(api, "rag-search")
    queries = {
        "how much memory does an H100 have": ("h100", "80 GB"),
        "do I pay for a whole hour if I stop my machine early?": ("billing", "no minimum hour"),
        "what happens if my cluster takes longer than a quarter of an hour": ("sla", "credited"),
        # answered from image documents: their text exists only in the pixels of images/*.png
        "how many leaf switches does a 128 node job use": ("ib-fabric", "under 4 leaf switches"),
        "my training run crashes with out of memory": ("out-of-memory", "in bf16"),
    }
    for query, (doc, phrase) in queries.items():
        out = _search(api, caller, {"query": query, "top_k": 2})
        assert doc in [h["id"] for h in out["hits"]], (query, out["hits"])
        assert phrase in out["answer"], (query, out["answer"])
        assert out["hits"][0]["score"] >= out["hits"][1]["score"]
    price = _search(api, caller, {"query": "H100 price per card-hour on a monthly package"})
    top = price["hits"][0]
    assert [top["id"], top["kind"], top["image"]] == [
        "price-sheet",
        "image",
        "images/price-sheet.png",
    ]
    assert "1.90" in top["text"] and "1.235" in top["text"]  # read from the scanned table
    bad = api.client.post("/api/v1/apps/rag-search/invoke", headers=caller, json={"top_k": 2})
    assert bad.status_code == 502 and "query: a non-empty string" in bad.text
    # an image as the query: a screenshot of a terminal's traceback
    shot = EXAMPLES / "rag-search" / "query-examples" / "cuda-oom.png"
    out = _search(api, caller, {"image_b64": base64.b64encode(shot.read_bytes()).decode()})
    assert "CUDA out of memory" in out["image_text"]
    assert out["hits"][0]["id"] == "out-of-memory", out["hits"]
    assert "micro-batch" in out["answer"], out["answer"]
    # a few bytes that would decode to 400 million pixels are refused before tesseract runs
    bomb = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + struct.pack(">II", 20000, 20000) + bytes(5)
    for body, error in [
        ({"image_b64": "not base64!"}, "not valid base64"),
        ({"image_b64": base64.b64encode(b"GIF89a....").decode()}, "a PNG or JPEG"),
        ({"image_b64": base64.b64encode(bomb).decode()}, "20000×20000 pixels; at most 25 MP"),
    ]:
        r = api.client.post("/api/v1/apps/rag-search/invoke", headers=caller, json=body)
        assert r.status_code == 502 and error in r.json()["error"]["message"], r.text
