"""SSH public keys of the signed-in account; every new instance gets them all."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from cardhour.api import schemas
from cardhour.api.deps import Ctx, get_ctx
from cardhour.db.models import SshKeyRow
from cardhour.services.accounts import ssh_keys

router = APIRouter(prefix="/ssh-keys", tags=["ssh-keys"])


def _read(row: SshKeyRow) -> schemas.SshKeyRead:
    return schemas.SshKeyRead(
        id=row.id,
        name=row.name,
        type=row.key_type,
        bits=row.bits,
        fingerprint=row.fingerprint,
        public_key=row.public_key,
        created_at=row.created_at,
    )


@router.post("", response_model=schemas.SshKeyRead, status_code=201)
def add(body: schemas.SshKeyCreate, ctx: Ctx = Depends(get_ctx)) -> schemas.SshKeyRead:
    """Add a public key: 422 `invalid_input` (or `private_key_refused`) when it is not one
    accepted OpenSSH public key, 409 `conflict` when the account has it or its name already.
    Adding the same key again is refused, so a retry cannot create a second copy."""
    with ctx.user_tx() as (session, user):
        return _read(ssh_keys.add(session, user, body.public_key, body.name, ctx.now))


@router.get("", response_model=list[schemas.SshKeyRead])
def list_keys(ctx: Ctx = Depends(get_ctx)) -> list[schemas.SshKeyRead]:
    with ctx.user_tx() as (session, user):
        return [_read(row) for row in ssh_keys.list_for(session, user)]


@router.delete("/{ident:path}", response_model=schemas.SshKeyRead)
def remove(ident: str, ctx: Ctx = Depends(get_ctx)) -> schemas.SshKeyRead:
    """Remove a key by id, name or fingerprint; running instances keep the keys they got."""
    with ctx.user_tx() as (session, user):
        return _read(ssh_keys.remove(session, user, ident))
