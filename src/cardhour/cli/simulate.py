"""`cardhour simulate`: replay an openb trace with a placement policy, under the FGD protocol.

Reads the pod list (`--trace`) and the node list (`--nodes`, default the
`openb_node_list_gpu_node.csv` next to the trace), runs one replay per seed (in `--jobs`
processes), and prints mean ± sd over the seeds per arrived %. `--compare` sets the authors'
published numbers (`fgd_expected_results/summary_by_arrival.csv` next to the trace) beside ours.
Everything is checked before the first replay starts, so bad input costs no time; it exits 2
with one line. Progress (one line per finished seed) goes to stderr, so `--json` stdout is
exactly one JSON object. The engine (numpy) is imported only when the command runs
(`cardhour.cli.simulation`), so other commands do not pay for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cardhour.cli.common import JsonOption
from cardhour.core.errors import InvalidInput

NODE_FILE = "openb_node_list_gpu_node.csv"


def simulate(
    trace: Annotated[Path, typer.Option("--trace", help="Pod list CSV (openb format).")],
    nodes: Annotated[
        Path | None,
        typer.Option("--nodes", help=f"Node list CSV (default: {NODE_FILE} next to the trace)."),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option("--policy", help="Policy name (default: the platform's default policy)."),
    ] = None,
    seeds: Annotated[str, typer.Option("--seeds", help="e.g. 42-51, 42 or 42,45.")] = "42-51",
    tune: Annotated[
        float, typer.Option("--tune", help="Tune the GPU demand to this × GPU capacity.")
    ] = 1.3,
    bare_metal: Annotated[
        float,
        typer.Option("--bare-metal", help="Share of the GPU demand sent as whole nodes (0-0.9)."),
    ] = 0.0,
    jobs: Annotated[int, typer.Option("--jobs", help="Seeds run in parallel processes.")] = 1,
    as_json: JsonOption = False,
    with_published: Annotated[
        bool,
        typer.Option("--compare", help="Show the FGD authors' published mean ± sd beside ours."),
    ] = False,
) -> None:
    """Replay a trace with a policy; report unallocated GPU and fragmentation per arrived %."""
    if jobs < 1:
        raise InvalidInput(f"--jobs must be at least 1, got {jobs}")
    from cardhour.cli import simulation

    simulation.run(
        simulation.Options(
            trace=trace,
            nodes=nodes or trace.parent / NODE_FILE,
            policy=policy,
            seeds=seeds,
            tune=tune,
            bare_metal=bare_metal,
            jobs=jobs,
            as_json=as_json,
            compare=with_published,
        )
    )
