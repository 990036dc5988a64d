"""Request body limits (docs/dev/security.md): a body over its route's limit is refused with
413 `too_large` (the error shape) before the route reads it, and a body that stalls is cut off
with 408 `body_timeout`.

Limits by route (`limit_for`): 1 MiB by default; the routes that take files have their own
(an app's code archive, an app call's input, a grant's PDF, an agent's report). A body that
declares a length over the limit is refused on the declaration, unread; any other is read here
as it arrives, refused once over its limit, and replayed to the route (so at most the limit is
held per request). Between two chunks at most `STALL_SECONDS` may pass (408 `body_timeout`).
"""

from __future__ import annotations

import asyncio
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cardhour.api.errors import error_response
from cardhour.core.errors import BodyTimeout

MIB = 1024 * 1024
DEFAULT_LIMIT = 1 * MIB
STALL_SECONDS = 30.0
#: (method, path pattern, limit): the routes whose bodies may be larger than the default
LIMITS = (
    ("POST", re.compile(r"/api/v1/apps"), 29 * MIB),  # a 20 MiB code archive in base64
    ("POST", re.compile(r"/api/v1/apps/[^/]+/invoke"), 10 * MIB + 64 * 1024),
    ("POST", re.compile(r"/console/apps/[^/]+/try"), 11 * MIB),
    ("PUT", re.compile(r"/api/v1/proposals/[^/]+/document"), 6 * MIB),  # its own 413 at 5 MiB
    ("POST", re.compile(r"/grants/(new|[^/]+/edit)"), 6 * MIB),  # the console's PDF form
    ("POST", re.compile(r"/api/v1/agent/report"), 16 * MIB),  # many containers' log tails
)


def limit_for(method: str, path: str) -> int:
    for verb, pattern, limit in LIMITS:
        if method == verb and pattern.fullmatch(path):
            return limit
    return DEFAULT_LIMIT


class BodyLimits:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        limit = limit_for(scope["method"], scope["path"])
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await _too_large(scope, receive, send, limit)  # refused unread
            return
        body, more = bytearray(), True  # read here, at most `limit`, then replayed
        guarded = _stall_guarded(receive)
        while more:
            try:
                message = await guarded()
            except BodyTimeout as exc:
                await error_response(408, exc.code, exc.message)(scope, receive, send)
                return
            if message["type"] != "http.request":  # the client left mid-body: nothing to act on
                return
            body.extend(message.get("body", b""))
            more = message.get("more_body", False)
            if len(body) > limit:
                await _too_large(scope, receive, send, limit)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:  # after the body: what the client does next (a disconnect)
                return await receive()
            replayed = True
            data = bytes(body)
            body.clear()  # not kept while a long poll waits
            return {"type": "http.request", "body": data, "more_body": False}

        await self.app(scope, replay, send)


def _stall_guarded(receive: Receive) -> Receive:
    """`receive` that raises BodyTimeout when a chunk of the body takes longer than
    `STALL_SECONDS`; once the body is complete it waits as long as the
    route does (a long poll waits on it for the client's disconnect)."""
    done = False

    async def guarded() -> Message:
        nonlocal done
        if done:
            return await receive()
        try:
            message = await asyncio.wait_for(receive(), STALL_SECONDS)
        except TimeoutError:
            raise BodyTimeout(
                f"no part of the request body came for {STALL_SECONDS:.0f} s"
            ) from None
        if message["type"] != "http.request" or not message.get("more_body", False):
            done = True
        return message

    return guarded


async def _too_large(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
    said = f"the request body is over {limit // 1024} KiB for {scope['method']} {scope['path']}"
    await error_response(413, "too_large", said, limit_bytes=limit)(scope, receive, send)
