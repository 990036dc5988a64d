"""Live inventory and quotes. Public: no key needed to see the cards before you click."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

from cardhour.api import schemas
from cardhour.api.convert import compute as convert
from cardhour.api.deps import Ctx, get_ctx
from cardhour.core.gpus import parse_gpu_request, validate_gpu_count
from cardhour.services.compute import catalog

router = APIRouter(tags=["offers"])


@router.get("/offers", response_model=list[schemas.OfferRead])
def offers(
    gpu: str | None = Query(default=None, description="Model, or MODEL:COUNT such as H100:8."),
    count: int | None = Query(default=None, description="GPUs wanted; adds a recommendation."),
    weights: str | None = Query(
        default=None, description="Model weights: says per offer whether they are cached there."
    ),
    ctx: Ctx = Depends(get_ctx),
) -> list[schemas.OfferRead]:
    model = None
    if gpu:
        req = parse_gpu_request(gpu)
        model = req.model
        if count is None and ":" in gpu:
            count = req.count
    if count is not None:
        count = validate_gpu_count(count)
    with ctx.tx() as session:
        found = catalog.offers(
            session, ctx.platform.catalog, ctx.platform.policy, ctx.now, model, count
        )
    shown = [convert.offer(o) for o in found]
    if weights:
        cat = ctx.platform.catalog
        for offer in shown:
            plan = cat.weights_plan(weights, offer.data_centre)
            offer.weights = schemas.WeightsPlanRead(
                id=plan.weights.id,
                mount=plan.weights.mount,
                local=plan.local,
                copy_seconds=plan.copy_seconds,
            )
    return shown


@router.get("/images", response_model=list[schemas.ImageRead])
def images(ctx: Ctx = Depends(get_ctx)) -> list[schemas.ImageRead]:
    """The image catalog (from the fleet file): what `launch --image` accepts, with versions."""
    found = ctx.platform.catalog.images
    return [
        schemas.ImageRead(
            id=i.id,
            name=i.name,
            description=i.description,
            versions=i.versions,
            default=n == 0,
            ref=i.ref,
        )
        for n, i in enumerate(found)
    ]
