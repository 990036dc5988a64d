"""`core.sshkeys` against keys made by the real `ssh-keygen` (fingerprints compared with its
`-l` output) and against hand-built blobs for what ssh-keygen cannot make here."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest

from cardhour.core import sshkeys
from cardhour.core.errors import InvalidInput

pytestmark = pytest.mark.skipif(
    shutil.which("ssh-keygen") is None, reason="ssh-keygen (openssh-client) is installed by make"
)

GENERATED = [
    ("ed25519", [], "ssh-ed25519", 256, "ED25519"),
    ("ecdsa", ["-b", "256"], "ecdsa-sha2-nistp256", 256, "ECDSA"),
    ("ecdsa", ["-b", "384"], "ecdsa-sha2-nistp384", 384, "ECDSA"),
    ("ecdsa", ["-b", "521"], "ecdsa-sha2-nistp521", 521, "ECDSA"),
    ("rsa", ["-b", "2048"], "ssh-rsa", 2048, "RSA"),
]


def keygen(tmp: Path, kind: str, extra: list[str], comment: str = "alice@laptop") -> Path:
    path = tmp / f"id_{kind}_{'_'.join(extra) or 'default'}"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, *extra, "-N", "", "-C", comment, "-f", str(path)],
        check=True,
    )
    return path


def keygen_fingerprint(pub: Path) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(pub)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split()[1]  # "256 SHA256:... comment (ED25519)"


@pytest.fixture
def keydir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.mark.parametrize(("kind", "extra", "key_type", "bits", "label"), GENERATED)
def test_keys_from_ssh_keygen_parse_with_its_fingerprint(
    keydir: Path, kind: str, extra: list[str], key_type: str, bits: int, label: str
) -> None:
    path = keygen(keydir, kind, extra)
    pub = path.with_suffix(".pub")
    key = sshkeys.parse(pub.read_text())
    assert (key.type, key.bits, key.label, key.comment) == (key_type, bits, label, "alice@laptop")
    assert key.fingerprint == keygen_fingerprint(pub)
    assert key.line == pub.read_text().strip()


@pytest.mark.parametrize(("kind", "extra"), [("ed25519", []), ("rsa", ["-b", "2048"])])
def test_the_private_half_is_refused_without_being_echoed(
    keydir: Path, kind: str, extra: list[str]
) -> None:
    private = keygen(keydir, kind, extra, comment="secret-comment").read_text()
    with pytest.raises(sshkeys.PrivateKeyRefused) as caught:
        sshkeys.parse(private)
    assert caught.value.code == "private_key_refused"
    assert "not stored" in caught.value.message
    body = "".join(private.splitlines()[1:3])
    assert body[:20] not in caught.value.message and "secret-comment" not in caught.value.message


def test_a_key_without_comment_and_with_spaces_around(keydir: Path) -> None:
    pub = keygen(keydir, "ed25519", [], comment="").with_suffix(".pub")
    key = sshkeys.parse(f"\n  {pub.read_text()}  \n")
    assert key.comment == "" and key.line == pub.read_text().strip()
    assert key.fingerprint == keygen_fingerprint(pub)


def test_rsa_under_2048_bits_is_refused(keydir: Path) -> None:
    pub = keygen(keydir, "rsa", ["-b", "1024"]).with_suffix(".pub")
    with pytest.raises(InvalidInput, match="RSA key of 1024 bits: at least 2048"):
        sshkeys.parse(pub.read_text())


def test_rfc4716_form_points_at_the_conversion(keydir: Path) -> None:
    pub = keygen(keydir, "ed25519", [], comment="x").with_suffix(".pub")
    rfc = subprocess.run(
        ["ssh-keygen", "-e", "-f", str(pub)], check=True, capture_output=True, text=True
    ).stdout
    with pytest.raises(InvalidInput, match="ssh-keygen -i -f"):
        sshkeys.parse(rfc)


def _wire(*fields: bytes) -> str:
    return base64.b64encode(b"".join(len(f).to_bytes(4, "big") + f for f in fields)).decode()


def test_security_key_types_are_walked_field_by_field(keydir: Path) -> None:
    plain = sshkeys.parse(keygen(keydir, "ecdsa", ["-b", "256"]).with_suffix(".pub").read_text())
    point = plain.blob[-65:]  # a real P-256 point (ssh-keygen checks that it is on the curve)
    ed = _wire(b"sk-ssh-ed25519@openssh.com", b"\x11" * 32, b"ssh:")
    ec = _wire(b"sk-ecdsa-sha2-nistp256@openssh.com", b"nistp256", point, b"ssh:")
    for line, label in [
        (f"sk-ssh-ed25519@openssh.com {ed} yubi", "ED25519-SK"),
        (f"sk-ecdsa-sha2-nistp256@openssh.com {ec} yubi", "ECDSA-SK"),
    ]:
        key = sshkeys.parse(line)
        assert key.label == label
        pub = keydir / f"{label}.pub"
        pub.write_text(line + "\n")
        assert key.fingerprint == keygen_fingerprint(pub)  # ssh-keygen reads it the same way


ED = _wire(b"ssh-ed25519", b"\x01" * 32)
COMPRESSED = _wire(b"ecdsa-sha2-nistp256", b"nistp256", b"\x02" + b"x" * 64)
OFF_CURVE = _wire(b"ecdsa-sha2-nistp256", b"nistp256", b"\x04" + b"x" * 64)
BIG_RSA = _wire(b"ssh-rsa", b"\x01\x00\x01", b"\x7f" + b"\xff" * 2048)  # 16,391 bits
HUGE_EXPONENT = _wire(b"ssh-rsa", b"\x01" * 3000, b"\x00" + b"\xc5" * 256)
SK_WEB = _wire(b"sk-ssh-ed25519@openssh.com", b"x" * 32, b"web")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty SSH key"),
        ("ssh-ed25519", "without its base64 part"),
        ("ssh-ed25519 not*base64", "not valid base64"),
        (f"ssh-rsa {ED}", "names another key type"),
        (f"ssh-ed25519 {_wire(b'ssh-ed25519', b'x' * 31)}", "32 bytes"),
        (f"ssh-ed25519 {_wire(b'ssh-ed25519', b'x' * 32, b'extra')}", "trailing bytes"),
        (f"ssh-ed25519 {ED[:-8]}", "not valid base64|truncated"),
        (f"ecdsa-sha2-nistp384 {_wire(b'ecdsa-sha2-nistp384', b'nistp256', b'x')}", "curve"),
        (f"ecdsa-sha2-nistp256 {COMPRESSED}", "uncompressed"),
        (f"ecdsa-sha2-nistp256 {OFF_CURVE}", "not on the curve"),
        (f"sk-ssh-ed25519@openssh.com {SK_WEB}", "ssh:"),
        (f"ssh-dss {ED}", "DSA"),
        (f"ssh-ed25519-cert-v01@openssh.com {ED}", "certificates"),
        (f'command="ls" ssh-ed25519 {ED} x', "options are not accepted"),
        (f"ssh-ed25519 {ED} a\nssh-ed25519 {ED} b", "one SSH key per request"),
        (f"ssh-ed25519 {ED} bell\x07", "control characters"),
        (f"ssh-ed25519 {ED} line\u2028break", "control characters"),
        (f"ssh-rsa {BIG_RSA}", "at most 16384"),
        (f"ssh-rsa {HUGE_EXPONENT}", "integer too large"),
        ("hello world", "not an OpenSSH public key"),
        ("ssh-ed25519 " + "A" * 20_000, "longer than"),
    ],
)
def test_bad_keys_get_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        sshkeys.parse(text)
