"""Long polls held outside the framework's stack.

A request the route decides to hold (an agent's report waiting for work: up to a heartbeat,
and a thousand hosts wait at once) would otherwise keep the whole ASGI stack alive while it
waits: ~24 coroutines and ~200 objects per request through FastAPI's middleware, routing and
dependency layers, all of which the garbage collector walks on every full collection (measured
with 1,000 agents: ~175,000 objects, a 145-190 ms pause every ~13 s, the heartbeat's p99).

`LongPolls`, installed as the outermost middleware, gives each HTTP request a slot. A route
that wants to wait calls `answer_later(request, later)` and returns at once: the stack unwinds,
the placeholder response it returns is not sent, and `LongPolls` awaits `later()` and sends the
response it gives. `later` must answer every outcome itself (an error as
`errors.response_for`): nothing above it maps exceptions but the server-error layer (a 500).
Without the middleware (an app built without it) `answer_later` awaits `later()` in place.
A middleware added inside `LongPolls` sees the placeholder (a 204), not the answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SLOT = "cardhour.long_poll"

Later = Callable[[], Awaitable[Response]]


class LongPolls:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        slot: list[Later] = []

        async def send_unless_held(message: Message) -> None:
            if not slot:
                await send(message)

        # a copy: what the layers below add to it (exit stacks, the route, the endpoint) goes
        # with them, not kept while the answer waits
        await self.app({**scope, SLOT: slot}, receive, send_unless_held)
        if slot:
            response = await slot[0]()
            await response(scope, receive, send)


async def answer_later(request: Request, later: Later) -> Response:
    """Hand `later` to `LongPolls` and return the placeholder the route returns (not sent);
    without `LongPolls`, `later()`'s response."""
    slot: list[Later] | None = request.scope.get(SLOT)
    if slot is None:
        return await later()
    slot.append(later)
    return Response(status_code=204)
