"""`api.long_polls`: a route's held answer is awaited outside the framework's stack (the route
has returned and its layers unwound before the answer is made), its placeholder is never
sent, an error the answer meets leaves as the error layer would give it, and without the
middleware the answer is awaited in place."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from starlette.responses import JSONResponse, Response

from cardhour.api import errors
from cardhour.api.long_polls import LongPolls, answer_later
from cardhour.core.errors import NotFound


def _app(events: list[str], middleware: bool = True) -> FastAPI:
    app = FastAPI()
    errors.install(app)
    if middleware:
        app.add_middleware(LongPolls)

    @app.get("/held")
    async def held(request: Request) -> Response:
        async def later() -> Response:
            events.append("answered")
            return JSONResponse({"answer": 42}, headers={"x-held": "yes"})

        placeholder = await answer_later(request, later)
        events.append("route returned")
        return placeholder

    @app.get("/fails")
    async def fails(request: Request) -> Response:
        async def later() -> Response:
            try:
                raise NotFound("no host 'h1'")
            except NotFound as exc:
                return errors.response_for(exc)

        return await answer_later(request, later)

    @app.get("/plain")
    async def plain() -> dict[str, int]:
        return {"plain": 1}

    return app


def test_the_answer_is_made_after_the_route_returned_and_only_it_is_sent() -> None:
    events: list[str] = []
    with TestClient(_app(events)) as client:
        r = client.get("/held")
        assert (r.status_code, r.json(), r.headers["x-held"]) == (200, {"answer": 42}, "yes")
        assert events == ["route returned", "answered"]  # held outside the route's stack
        assert client.get("/plain").json() == {"plain": 1}  # other routes as ever
        failed = client.get("/fails")
        assert failed.status_code == 404
        assert failed.json()["error"]["code"] == "not_found"


def test_without_the_middleware_the_answer_is_awaited_in_place() -> None:
    events: list[str] = []
    with TestClient(_app(events, middleware=False)) as client:
        r = client.get("/held")
        assert (r.status_code, r.json()) == (200, {"answer": 42})
        assert events == ["answered", "route returned"]
