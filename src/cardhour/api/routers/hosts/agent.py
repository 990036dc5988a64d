"""`/agent`: the channel a host agent dials out on (no inbound port on the host).

`POST /agent/join` trades a join token for the host credential. `GET /agent/app-context`
gives the build context of an app replica wanted on the host (`backends.apps.hosts`).
`POST /agent/report` is the heartbeat: the agent sends its inventory and containers and gets
the containers wanted on its host; with `?wait=S&since=V` the answer waits up to S seconds for
that list to move past version V (a long poll: an agent is told of new work within a fraction
of a second), held outside the framework's stack (`api.long_polls`).
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from cardhour.api import errors, schemas
from cardhour.api.deps import Ctx, get_ctx
from cardhour.api.long_polls import answer_later
from cardhour.api.routers.hosts.watch import VersionWatch, hold_for
from cardhour.core.errors import NotFound
from cardhour.db.engine import transaction
from cardhour.platform import Platform
from cardhour.services.hosts import enrolment, reports

router = APIRouter(prefix="/agent", tags=["agent"])
MAX_WAIT_SECONDS = 60
JSON = "application/json"


@router.post("/join", response_model=schemas.AgentJoined)
def join(body: schemas.AgentJoin, ctx: Ctx = Depends(get_ctx)) -> schemas.AgentJoined:
    """401 for a token that is unknown, used already or expired."""
    with ctx.tx() as session:
        host, credential = enrolment.join(session, body.token, ctx.now)
        name = host.name
    return schemas.AgentJoined(
        host=name,
        credential=credential,
        heartbeat_seconds=ctx.platform.settings.hosts.heartbeat_seconds,
    )


@router.get(
    "/app-context",
    response_class=Response,
    responses={200: {"content": {"application/gzip": {}}, "description": "A gzipped tar."}},
)
def app_context(
    host: str = Query(description="The agent's host name."),
    workload: str = Query(max_length=64, description="The app replica's workload."),
    ctx: Ctx = Depends(get_ctx),
) -> Response:
    """The build context of the app version an app replica wanted on this host runs (its
    Containerfile, package, runner and wheels). 401 for an unknown or revoked credential, 403
    for another host's name, 404 when no such replica is wanted on this host or the control
    plane no longer has its version (a restart: the replica is no longer wanted either)."""
    with ctx.tx() as session:
        row = enrolment.authenticate(session, ctx.api_key, host)
        key = reports.wanted_app(session, row, workload)
    packed = ctx.platform.app_build_context(key)
    if packed is None:
        raise NotFound(f"the control plane has no build of app version {key!r}")
    return Response(packed, media_type="application/gzip")


def _watch(request: Request, platform: Platform) -> VersionWatch:
    watch: VersionWatch | None = getattr(request.app.state, "host_watch", None)
    if watch is None:

        def read(host_ids: list[str]) -> dict[str, int]:
            with transaction(platform.sessions) as session:
                return reports.versions(session, host_ids)

        watch = request.app.state.host_watch = VersionWatch(read)
        platform.host_book.on_change(watch.nudge)
    return watch


def _containers(body: schemas.AgentReport) -> list[reports.ContainerReport] | None:
    if body.containers is None:
        return None
    return [
        reports.ContainerReport(
            c.workload, c.state, c.model_dump(exclude={"workload", "state"}, exclude_none=True)
        )
        for c in body.containers
    ]


def _record(
    ctx: Ctx, body: schemas.AgentReport, containers: list[reports.ContainerReport] | None
) -> tuple[str, reports.Desired]:
    """The full path: a report that says something new, or the first."""
    with ctx.tx() as session:
        host = enrolment.authenticate(session, ctx.api_key, body.host)
        desired = reports.record(
            session,
            host,
            ctx.now,
            containers,
            body.inventory,
            body.address,
            body.runtime,
            body.standin,
        )
        host_id = host.id
    ctx.platform.heartbeats.lists.keep(host_id, desired)
    return host_id, desired


def _desired(ctx: Ctx, host_name: str) -> reports.Desired:
    with ctx.tx() as session:
        host = enrolment.authenticate(session, ctx.api_key, host_name)
        desired, host_id = reports.desired(session, host), host.id
    ctx.platform.heartbeats.lists.keep(host_id, desired)
    return desired


@router.post("/report", response_model=schemas.AgentDesired)
async def report(
    body: schemas.AgentReport,
    request: Request,
    wait: float = Query(0, ge=0, le=MAX_WAIT_SECONDS, description="Seconds to wait for work."),
    since: int | None = Query(None, description="The version the agent holds."),
    ctx: Ctx = Depends(get_ctx),
) -> schemas.AgentDesired | Response:
    """The heartbeat. 401 for an unknown or revoked credential, 403 for another host's name."""
    watch = _watch(request, ctx.platform)
    seen = watch.sequence
    containers = _containers(body)
    repeat: tuple[str, reports.Desired] | None = None
    if body.inventory is None:
        said = reports.digest(containers, body.address, body.runtime, body.standin)
        repeat = await ctx.platform.heartbeats.repeated(ctx.api_key, body.host, ctx.now, said)
    if repeat is None:
        repeat = await run_in_threadpool(_record, ctx, body, containers)
    host_id, desired = repeat
    if desired.changed:  # a container started, failed or answered: provisioning looks now
        ctx.platform.wake()
    if not (wait > 0 and since is not None and desired.version == since):
        return _answer(ctx, body.host, desired)

    async def later() -> Response:
        answer, hold, started = desired, hold_for(wait), time.monotonic()
        if await watch.wait(host_id, since, hold, seen):
            # new work came: read it (the time to it was held; reading it is answering)
            hold = time.monotonic() - started
            ctx.now = ctx.platform.clock.now()
            try:
                answer = await run_in_threadpool(_desired, ctx, body.host)
            except Exception as exc:  # noqa: BLE001 - answered as the error layer would
                return errors.response_for(exc)
        # held: the hold as planned, so that a late wake-up (a pause of this process) counts
        # as the answer's latency, not as the hold
        held = _answer(ctx, body.host, answer, hold)
        return Response(held.model_dump_json(), 200, media_type=JSON)

    return await answer_later(request, later)


def _answer(
    ctx: Ctx, host: str, desired: reports.Desired, held: float = 0.0
) -> schemas.AgentDesired:
    return schemas.AgentDesired(
        host=host,
        version=desired.version,
        containers=desired.containers,
        heartbeat_seconds=ctx.platform.settings.hosts.heartbeat_seconds,
        held_seconds=round(held, 3),
    )
