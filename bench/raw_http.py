"""A minimal HTTP/1.1 client on asyncio streams for load generators: one keep-alive connection,
JSON in and out, nothing else (no TLS, no redirects, no chunked bodies). A thousand of them cost
a bench's event loop far less than a thousand httpx clients (bench/agents.py: the load
generator's own lateness counts in every latency it measures).

`RawClient.post` returns a `RawResponse` or raises `RawHTTPError` (a connection that failed,
closed, or answered what this client does not read). A connection idle for `keepalive` seconds
is closed before the next request (a server closes idle ones: uvicorn after 5 s)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import urlencode, urlsplit


class RawHTTPError(Exception):
    """The request failed without an HTTP answer."""


@dataclass(frozen=True)
class RawResponse:
    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class RawClient:
    def __init__(self, base_url: str, timeout: float, keepalive: float = 4.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"only http://host:port URLs: {base_url!r}")
        self.host, self.port = parts.hostname, parts.port or 80
        self.timeout, self.keepalive = timeout, keepalive
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._idle_since = 0.0

    async def __aenter__(self) -> RawClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._close()

    async def post(
        self,
        path: str,
        json: Any,  # noqa: A002 - httpx's name, so callers read the same
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> RawResponse:
        if params:
            path = f"{path}?{urlencode(params)}"
        body = _dumps(json)
        head = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        request = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        try:
            return await asyncio.wait_for(self._exchange(request), self.timeout)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
            self._close()
            raise RawHTTPError(f"{type(exc).__name__}: {exc}") from exc

    async def _exchange(self, request: bytes) -> RawResponse:
        if self._writer is not None and time.monotonic() - self._idle_since > self.keepalive:
            self._close()
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        self._writer.write(request)
        await self._writer.drain()
        status_line = await self._reader.readuntil(b"\r\n")
        status = int(status_line.split()[1])
        length, close = 0, False
        while (line := await self._reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                close = True
            elif name == "transfer-encoding":
                raise ValueError("chunked answers are not read by this client")
        content = await self._reader.readexactly(length)
        if close:
            self._close()
        self._idle_since = time.monotonic()
        return RawResponse(status, content)

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
