"""The hosts' calls: an operator's enrolment (`HostCalls`, mixed into `CardhourClient`) and the
host agent's channel (`AgentChannel`, the agent's own connection, its host credential as the
bearer token)."""

from __future__ import annotations

from urllib.parse import quote

from cardhour.api.schemas.hosts import (
    AgentDesired,
    AgentJoin,
    AgentJoined,
    AgentReport,
    HostCreate,
    HostEnrolled,
    HostRead,
)
from cardhour.client.connection import Connection


class HostCalls(Connection):
    """/admin/hosts (admin role)."""

    def admin_add_host(self, body: HostCreate) -> HostEnrolled:
        """Enrol a server: its one-time join token and the command to run there."""
        return self._call(HostEnrolled, "POST", "/admin/hosts", json=body.model_dump(mode="json"))

    def admin_hosts(self) -> list[HostRead]:
        return self._call(list[HostRead], "GET", "/admin/hosts")

    def admin_remove_host(self, name: str) -> HostRead:
        """Revoke its credential; instances on it are placed again elsewhere. Idempotent."""
        return self._call(HostRead, "DELETE", f"/admin/hosts/{quote(name, safe='')}")


class AgentChannel(Connection):
    """/agent: what a host agent calls. `api_key` is the host credential once joined."""

    def join(self, token: str) -> AgentJoined:
        body = AgentJoin(token=token).model_dump(mode="json")
        return self._call(AgentJoined, "POST", "/agent/join", json=body)

    def report(
        self, body: AgentReport, wait: float = 0.0, since: int | None = None
    ) -> AgentDesired:
        """The heartbeat; with `wait` and `since`, a long poll for new work (see the API)."""
        params: dict[str, float | int] = {"wait": wait}
        if since is not None:
            params["since"] = since
        return self._call(
            AgentDesired,
            "POST",
            "/agent/report",
            json=body.model_dump(mode="json", exclude_none=True),
            params=params,
            timeout=wait + 30.0,
        )

    def app_context(self, host: str, workload: str) -> bytes:
        """The build context (a gzipped tar) of the app replica `workload` wanted on `host`."""
        params = {"host": host, "workload": workload}
        return self._bytes("GET", "/agent/app-context", params=params, timeout=120.0)
