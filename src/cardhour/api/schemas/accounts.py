"""Sign-up, login, users and roles, SSH keys.

Pure pydantic: the typed client (`cardhour.client`) imports these too.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class SignupCreate(BaseModel):
    email: str = Field(examples=["ada@example.com"])
    password: str = Field(min_length=1, examples=["correct horse battery"])


class LoginCreate(SignupCreate):
    key_name: str = Field(default="cli", max_length=100)


class UserRead(BaseModel):
    id: str
    email: str
    role: str
    created_at: datetime


class AuthEventRead(BaseModel):
    """A lock the sign-in throttle put on an account (`account:<email>`) or a client address
    (`address:<ip>`)."""

    at: datetime
    kind: str
    key: str
    detail: str


class RoleSet(BaseModel):
    email: str = Field(examples=["rev@example.com"])
    role: str = Field(description="user | reviewer | admin", examples=["reviewer"])


class AuthRead(BaseModel):
    api_key: str = Field(description="Shown once; only its hash is stored.")
    user: UserRead


class SshKeyCreate(BaseModel):
    public_key: str = Field(
        max_length=20_000,
        description="One OpenSSH public key line (the .pub file); private keys are refused.",
        examples=["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI... ada@laptop"],
    )
    name: str | None = Field(
        default=None, max_length=64, description="Defaults to the key's comment."
    )


class SshKeyRead(BaseModel):
    id: str
    name: str
    type: str = Field(examples=["ssh-ed25519"])
    bits: int
    fingerprint: str = Field(description="As `ssh-keygen -l` prints it: SHA256:…")
    public_key: str
    created_at: datetime
