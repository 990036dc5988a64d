"""OpenSSH public keys: parse, check and fingerprint them. Pure.

Accepted: one key in the `authorized_keys` / `.pub` form `TYPE BASE64 [COMMENT]` of the types
OpenSSH 9 accepts by default — `ssh-ed25519`, `ecdsa-sha2-nistp256/384/521`, `ssh-rsa` (at least
2048 bits) and the FIDO `sk-` variants. The base64 blob is decoded and walked field by field
(RFC 4253 §6.6, RFC 5656 §3.1, RFC 8709, OpenSSH PROTOCOL.u2f): its type must match the line's,
every field must be well formed and nothing may follow the last one.

Refused, each with its own message: anything that looks like a private key (never stored,
never echoed back), `ssh-dss` (disabled by OpenSSH since 7.0), certificates, the RFC 4716
`---- BEGIN SSH2 PUBLIC KEY ----` form (convert with `ssh-keygen -i -f`), `authorized_keys`
options before the type, and more than one key.

The fingerprint is OpenSSH's default: `SHA256:` + unpadded base64 of SHA-256 of the blob, as
`ssh-keygen -l -f KEY.pub` prints it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from cardhour.core.errors import InvalidInput

MAX_LINE = 16_384  # an 16384-bit RSA key is about 2.8 kB of base64; nothing real comes close
MIN_RSA_BITS = 2048
MAX_RSA_BITS = 16_384  # OpenSSH's SSHBUF_MAX_BIGNUM: it refuses larger moduli
MAX_MPINT_BYTES = 2049
# printable, no control characters nor line or paragraph separators (U+0085, U+2028, U+2029)
_COMMENT = re.compile(r"[\x20-\x7e\u00a0-\u2027\u202a-\ud7ff\ue000-\ufffd]*")

# NIST curves y² = x³ − 3x + b over GF(p) (FIPS 186-4 D.1.2): (p, b, coordinate bytes)
_CURVES = {
    "nistp256": (
        2**256 - 2**224 + 2**192 + 2**96 - 1,
        0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B,
        32,
    ),
    "nistp384": (
        2**384 - 2**128 - 2**96 + 2**32 - 1,
        int(
            "b3312fa7e23ee7e4988e056be3f82d19181d9c6efe8141120314088f5013875a"
            "c656398d8a2ed19d2a85c8edd3ec2aef",
            16,
        ),
        48,
    ),
    "nistp521": (
        2**521 - 1,
        int(
            "0051953eb9618e1c9a1f929a21a0b68540eea2da725b99b315f3b8b489918ef1"
            "09e156193951ec7e937b1652c0bd3bb1bf073573df883d2c34f1ef451fd46b503f00",
            16,
        ),
        66,
    ),
}
_TYPES = {
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
}


class PrivateKeyRefused(InvalidInput):
    """Someone pasted a private key. It is neither stored nor repeated in the error."""

    code = "private_key_refused"


@dataclass(frozen=True)
class PublicKey:
    type: str
    blob: bytes
    comment: str
    bits: int

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256(self.blob).digest()
        return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")

    @property
    def line(self) -> str:
        """The key as one `authorized_keys` line (canonical base64, comment kept)."""
        text = f"{self.type} {base64.b64encode(self.blob).decode()}"
        return f"{text} {self.comment}" if self.comment else text

    @property
    def label(self) -> str:
        """What `ssh-keygen -l` calls it: ED25519, RSA, ECDSA, ED25519-SK, ECDSA-SK."""
        base = "RSA" if self.type == "ssh-rsa" else "ECDSA" if "ecdsa" in self.type else "ED25519"
        return f"{base}-SK" if self.type.startswith("sk-") else base


class _Reader:
    """RFC 4251 §5 wire fields from a key blob."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def string(self) -> bytes:
        if self.at + 4 > len(self.data):
            raise _Malformed("truncated")
        size = int.from_bytes(self.data[self.at : self.at + 4], "big")
        start, self.at = self.at + 4, self.at + 4 + size
        if self.at > len(self.data):
            raise _Malformed("truncated")
        return self.data[start : self.at]

    def mpint(self) -> int:
        raw = self.string()
        if len(raw) > MAX_MPINT_BYTES:
            raise _Malformed("integer too large")
        if raw and raw[0] & 0x80:
            raise _Malformed("negative integer")
        if len(raw) > 1 and raw[0] == 0 and not raw[1] & 0x80:
            raise _Malformed("integer not in minimal form")
        return int.from_bytes(raw, "big")

    def done(self) -> bool:
        return self.at == len(self.data)


class _Malformed(Exception):
    pass


def parse(text: str) -> PublicKey:
    """One OpenSSH public key from `text` (surrounding blank space ignored). Raises
    PrivateKeyRefused for a private key and InvalidInput for anything else that is not one
    accepted public key; messages never quote key material."""
    if "PRIVATE KEY" in text or "PuTTY-User-Key-File" in text:
        raise PrivateKeyRefused(
            "that is a private key: it was not stored. Paste the public key (the .pub file) "
            "instead, and consider the private key exposed if you sent it over a network"
        )
    text = text.strip()
    if not text:
        raise InvalidInput("empty SSH key")
    if len(text) > MAX_LINE:
        raise InvalidInput(f"SSH key longer than {MAX_LINE} characters")
    if text.startswith("---- BEGIN SSH2 PUBLIC KEY"):
        raise InvalidInput(
            "RFC 4716 (SSH2) key format: convert it with `ssh-keygen -i -f KEY` and paste the "
            "one line it prints"
        )
    if "\n" in text or "\r" in text:
        raise InvalidInput("one SSH key per request (this text has several lines)")
    parts = text.split(None, 2)
    key_type = parts[0]
    if key_type not in _TYPES:
        raise InvalidInput(_type_message(key_type, text))
    if len(parts) < 2:
        raise InvalidInput(f"{key_type} key without its base64 part")
    comment = parts[2].strip() if len(parts) == 3 else ""
    if not _COMMENT.fullmatch(comment):
        raise InvalidInput("SSH key comment has control characters")
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"{key_type} key: its second field is not valid base64") from None
    try:
        bits = _check_blob(key_type, blob)
    except _Malformed as exc:
        raise InvalidInput(f"{key_type} key: malformed key data ({exc})") from None
    if key_type == "ssh-rsa" and bits > MAX_RSA_BITS:
        raise InvalidInput(f"RSA key of {bits} bits: OpenSSH accepts at most {MAX_RSA_BITS}")
    if key_type == "ssh-rsa" and bits < MIN_RSA_BITS:
        raise InvalidInput(
            f"RSA key of {bits} bits: at least {MIN_RSA_BITS} are required (or use ed25519: "
            "`ssh-keygen -t ed25519`)"
        )
    return PublicKey(key_type, blob, comment, bits)


def _type_message(key_type: str, text: str) -> str:
    if key_type == "ssh-dss":
        return "DSA (ssh-dss) keys are not accepted (OpenSSH disabled them): use ed25519"
    if key_type.endswith("-cert-v01@openssh.com"):
        return "SSH certificates are not accepted here: paste the plain public key"
    if any(t in text for t in _TYPES):
        return "authorized_keys options are not accepted: paste the key from its type on"
    return (
        "not an OpenSSH public key (expected one line like 'ssh-ed25519 AAAA... you@host'; "
        "types: " + ", ".join(sorted(_TYPES)) + ")"
    )


def _check_blob(key_type: str, blob: bytes) -> int:
    """Walk the blob's fields; return the key's size in bits."""
    r = _Reader(blob)
    if r.string() != key_type.encode():
        raise _Malformed("the key data names another key type")
    if key_type == "ssh-rsa":
        exponent, modulus = r.mpint(), r.mpint()
        if exponent < 3 or exponent % 2 == 0 or modulus % 2 == 0:
            raise _Malformed("not an RSA public key")
        bits = modulus.bit_length()
    elif key_type.endswith("ed25519") or key_type.endswith("ed25519@openssh.com"):
        if len(r.string()) != 32:
            raise _Malformed("an Ed25519 key is 32 bytes")
        bits = 256
    else:
        curve = r.string().decode("ascii", "replace")
        if curve not in _CURVES or not key_type.startswith(
            ("ecdsa-sha2-" + curve, "sk-ecdsa-sha2-" + curve)
        ):
            raise _Malformed("curve does not match the key type")
        _check_point(curve, r.string())
        bits = int(curve.removeprefix("nistp"))
    if key_type.startswith("sk-"):
        application = r.string()
        if not application.startswith(b"ssh:"):
            raise _Malformed("a security-key application must start with 'ssh:'")
    if not r.done():
        raise _Malformed("trailing bytes")
    return bits


def _check_point(curve: str, point: bytes) -> None:
    """An uncompressed point (0x04 || X || Y) on the curve, as OpenSSH checks it."""
    p, b, size = _CURVES[curve]
    if len(point) != 1 + 2 * size or point[0] != 4:
        raise _Malformed("not an uncompressed curve point")
    x = int.from_bytes(point[1 : 1 + size], "big")
    y = int.from_bytes(point[1 + size :], "big")
    if x >= p or y >= p or (y * y - (x * x * x - 3 * x + b)) % p != 0:
        raise _Malformed("the point is not on the curve")
