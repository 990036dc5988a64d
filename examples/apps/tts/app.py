"""Text to speech on the CPU with Debian's espeak-ng (`apt-get install espeak-ng`): the text in,
a 22.05 kHz mono WAV out."""

from __future__ import annotations

import base64
import re
import struct
import subprocess


def handle(request: dict) -> dict:
    text = str(request["text"])[:2000]
    voice = str(request.get("voice") or "en")
    if not re.fullmatch(r"[a-zA-Z0-9_+-]{1,32}", voice):
        raise ValueError("voice: an espeak-ng voice name such as en or zh")
    speed = int(request.get("speed") or 175)
    done = subprocess.run(
        ["espeak-ng", "--stdout", "-v", voice, "-s", str(max(80, min(speed, 400))), text],
        capture_output=True,
        timeout=60,
        check=True,
    )
    wav = done.stdout
    # the RIFF header: bytes per second at offset 28; the data chunk's size follows "data"
    rate = struct.unpack_from("<I", wav, 28)[0]
    data = wav.find(b"data")
    size = len(wav) - (data + 8)
    return {"wav_b64": base64.b64encode(wav).decode(), "seconds": round(size / rate, 3)}
