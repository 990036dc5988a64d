"""Image restoration on the CPU: a 3×3 median filter (denoise), then an optional 2× bilinear
upscale, on an 8-bit grayscale PGM (P5 binary or P2 ASCII)."""

from __future__ import annotations

import base64

import numpy as np


def read_pgm(data: bytes) -> np.ndarray:
    tokens: list[bytes] = []
    pos = 0
    while len(tokens) < 4:  # magic, width, height, maxval; comments start with '#'
        while data[pos : pos + 1].isspace():
            pos += 1
        if data[pos : pos + 1] == b"#":
            pos = data.index(b"\n", pos) + 1
            continue
        end = pos
        while end < len(data) and not data[end : end + 1].isspace():
            end += 1
        tokens.append(data[pos:end])
        pos = end
    magic, width, height, maxval = tokens[0], int(tokens[1]), int(tokens[2]), int(tokens[3])
    if maxval > 255 or width * height > 16_000_000:
        raise ValueError("an 8-bit PGM of at most 16 megapixels")
    if magic == b"P5":
        pixels = np.frombuffer(data[pos + 1 : pos + 1 + width * height], dtype=np.uint8)
    elif magic == b"P2":
        pixels = np.array(data[pos:].split()[: width * height], dtype=np.uint8)
    else:
        raise ValueError("not a grayscale PGM (P2 or P5)")
    if pixels.size != width * height:
        raise ValueError("the PGM is cut short")
    return pixels.reshape(height, width)


def write_pgm(image: np.ndarray) -> bytes:
    height, width = image.shape
    return f"P5\n{width} {height}\n255\n".encode() + image.astype(np.uint8).tobytes()


def median3(image: np.ndarray) -> np.ndarray:
    padded = np.pad(image, 1, mode="edge")
    h, w = image.shape
    windows = np.stack([padded[dy : dy + h, dx : dx + w] for dy in range(3) for dx in range(3)])
    return np.median(windows, axis=0).astype(np.uint8)


def upscale2(image: np.ndarray) -> np.ndarray:
    h, w = image.shape
    ys, xs = np.linspace(0, h - 1, 2 * h), np.linspace(0, w - 1, 2 * w)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, h - 1), np.minimum(x0 + 1, w - 1)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    f = image.astype(float)
    top = f[y0][:, x0] * (1 - fx) + f[y0][:, x1] * fx
    bottom = f[y1][:, x0] * (1 - fx) + f[y1][:, x1] * fx
    return np.clip(np.rint(top * (1 - fy) + bottom * fy), 0, 255).astype(np.uint8)


def handle(request: dict) -> dict:
    image = read_pgm(base64.b64decode(request["pgm_b64"]))
    clean = median3(image)
    changed = int((clean != image).sum())
    if request.get("upscale"):
        clean = upscale2(clean)
    return {
        "pgm_b64": base64.b64encode(write_pgm(clean)).decode(),
        "width": int(clean.shape[1]),
        "height": int(clean.shape[0]),
        "changed_pixels": changed,
    }
