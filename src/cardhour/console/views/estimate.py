"""The estimator page's data: the form's fields, the report, and a chart of time and cost against
GPU count, drawn as inline SVG by the template (coordinates computed here, no JS library).

The chart reruns the same estimate at powers of two around the chosen count (the chosen count
included): wall-clock days on a log scale, on-demand cost on a linear scale from zero, so a
cost that barely moves with the GPU count looks flat, as it is.
"""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal
from typing import Any

from cardhour.core.catalog import Catalog
from cardhour.core.errors import CardhourError
from cardhour.estimator import GPUS, PRESETS, EstimateQuery, EstimateRead, run
from cardhour.estimator.estimate import MAX_GPUS

FIELDS = ("model", "params", "layers", "hidden", "seq_len", "mode", "tokens", "gpu", "gpus",
          "mfu", "goodput", "price", "usd_cny", "days", "gpu_hours")  # fmt: skip
DEFAULTS = {"model": "llama3-8b", "tokens": "1T", "gpu": "H100", "gpus": "64", "mode": "pretrain"}
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 440, 230, 64, 16, 28, 36
SPAN = 6  # powers of two each side of the chosen count


def form_values(params: dict[str, str]) -> dict[str, str]:
    """The form's fields from the query string; defaults when the page is opened bare."""
    if not any(params.get(k) for k in FIELDS):
        return dict(DEFAULTS)
    return {k: (params.get(k) or "").strip()[:100] for k in FIELDS}


def to_query(form: dict[str, str]) -> EstimateQuery:
    def opt(key: str) -> str | None:
        return form.get(key) or None

    return EstimateQuery(
        tokens=form.get("tokens", ""), gpu=form.get("gpu") or "H100", gpus=form.get("gpus") or "8",
        model=opt("model") if form.get("model") != "custom" else None, params=opt("params"),
        layers=opt("layers"), hidden=opt("hidden"), seq_len=opt("seq_len"),
        mode=form.get("mode") or "pretrain", mfu=opt("mfu"), goodput=opt("goodput"),
        price=opt("price"), usd_cny=opt("usd_cny"), days=opt("days"), gpu_hours=opt("gpu_hours"),
    )  # fmt: skip


def choices(catalog: Catalog) -> dict[str, Any]:
    fleet = [m for m in catalog.gpu_models if not any(m.id == g.id for g in GPUS)]
    return {
        "presets": [(p.id, p.name) for p in PRESETS],
        "gpu_models": [(g.id, g.name) for g in [*GPUS, *fleet]],
        "modes": [("pretrain", "pre-training"), ("full", "full fine-tuning"), ("lora", "LoRA")],
    }


def result(catalog: Catalog, form: dict[str, str]) -> dict[str, Any]:
    """`{"report", "chart"}`, or `{"estimate_error"}` with the one-line message."""
    query = to_query(form)
    try:
        report = run(query, catalog)
    except CardhourError as exc:
        return {"estimate_error": exc.message}
    return {"report": report, "chart": chart(catalog, query, report)}


def _counts(chosen: int) -> list[int]:
    low = max(0, int(math.log2(chosen)) - SPAN)
    counts = {2**i for i in range(low, low + 2 * SPAN + 1) if 2**i <= MAX_GPUS} | {chosen}
    return sorted(counts)


def chart(catalog: Catalog, query: EstimateQuery, report: EstimateRead) -> dict[str, Any]:
    plain = replace(query, days=None, gpu_hours=None, check=False)
    points = []
    for n in _counts(report.gpus):
        r = report if n == report.gpus else run(replace(plain, gpus=str(n)), catalog)
        cost = float(Decimal(r.cost_on_demand)) if r.cost_on_demand is not None else None
        points.append((n, r.seconds / 86_400, cost))
    xs = [math.log2(n) for n, _, _ in points]
    days = [math.log10(max(d, 1e-6)) for _, d, _ in points]
    panels = [_panel("wall clock (days, log scale)", xs, days, [d for _, d, _ in points],
                     points, report.gpus, log=True)]  # fmt: skip
    costs = [c for _, _, c in points]
    if all(c is not None for c in costs):
        values = [float(c or 0) for c in costs]
        panels.append(_panel(f"cost on demand ({report.currency})", xs, values, values, points,
                             report.gpus, log=False))  # fmt: skip
    return {"width": WIDTH, "height": HEIGHT, "panels": panels,
            "rows": [{"gpus": n, "days": d, "cost": c} for n, d, c in points]}  # fmt: skip


def _panel(title: str, xs: list[float], ys: list[float], raw: list[float],
           points: list[tuple[int, float, float | None]], chosen: int, *, log: bool
           ) -> dict[str, Any]:  # fmt: skip
    x0, x1 = min(xs), max(xs)
    y0, y1 = (math.floor(min(ys)), math.ceil(max(ys))) if log else (0.0, max(ys) * 1.1 or 1.0)
    if y1 == y0:
        y1 = y0 + 1

    def px(x: float) -> float:
        return LEFT + (x - x0) / ((x1 - x0) or 1) * (WIDTH - LEFT - RIGHT)

    def py(y: float) -> float:
        return HEIGHT - BOTTOM - (y - y0) / (y1 - y0) * (HEIGHT - TOP - BOTTOM)

    coords = [(round(px(x), 1), round(py(y), 1)) for x, y in zip(xs, ys, strict=True)]
    if log:
        y_ticks = [(round(py(e), 1), _short(10.0**e)) for e in range(int(y0), int(y1) + 1)]
    else:
        y_ticks = [(round(py(y1 * i / 4), 1), _short(y1 * i / 4)) for i in range(5)]
    x_ticks = [(round(px(x), 1), f"{n:,}") for x, (n, _, _) in zip(xs, points, strict=True)
               if n & (n - 1) == 0 and int(x) % 2 == 0]  # fmt: skip
    i = next(k for k, (n, _, _) in enumerate(points) if n == chosen)
    return {
        "title": title,
        "polyline": " ".join(f"{x},{y}" for x, y in coords),
        "dots": [{"x": x, "y": y, "n": n, "value": _short(v)}
                 for (x, y), (n, _, _), v in zip(coords, points, raw, strict=True)],
        "x_ticks": x_ticks,
        "y_ticks": y_ticks,
        "marker": {"x": coords[i][0], "y": coords[i][1], "label": _short(raw[i])},
        "plot": {"left": LEFT, "right": WIDTH - RIGHT, "top": TOP, "bottom": HEIGHT - BOTTOM},
    }  # fmt: skip


def _short(value: float) -> str:
    """Axis labels: 0.5, 12, 3.4k, 1.2M, 5.6B."""
    for suffix, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"
