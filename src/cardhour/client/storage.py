"""The volumes' calls of `CardhourClient`."""

from __future__ import annotations

from urllib.parse import quote

from cardhour.api.schemas.storage import VolumeCreate, VolumeRead
from cardhour.client.connection import Connection


class VolumeCalls(Connection):
    """/volumes: each method is one request (see `Connection` for errors and retries)."""

    def create_volume(self, name: str, size: str | int, data_centre: str) -> VolumeRead:
        body = VolumeCreate(name=name, size=size, data_centre=data_centre)
        return self._call(VolumeRead, "POST", "/volumes", json=body.model_dump())

    def volumes(self, all: bool = False) -> list[VolumeRead]:
        """Your volumes; deleted ones too with `all=True`."""
        params = {"all": "true"} if all else {}
        return self._call(list[VolumeRead], "GET", "/volumes", params=params)

    def get_volume(self, ident: str) -> VolumeRead:
        return self._call(VolumeRead, "GET", f"/volumes/{quote(ident, safe='')}")

    def delete_volume(self, ident: str) -> VolumeRead:
        """By id or name; refused (409) while attached."""
        return self._call(VolumeRead, "DELETE", f"/volumes/{quote(ident, safe='')}")
