"""`cardhour slurm NAME [--out DIR]`: one-click Slurm for a running cluster (the files come from
`GET /api/v1/instances/{id}/slurm`, rendered by `core.slurmconf`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cardhour.cli.common import JsonOption, KeyOption, UrlOption, connect, out, print_json


def slurm(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A running instance (name or id).")],
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Write slurm.conf, gres.conf, topology.conf here."),
    ] = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    api_key: KeyOption = None,
) -> None:
    """One-click Slurm: the config files that make the cluster's nodes a Slurm cluster of its
    own (its head runs slurmctld; the InfiniBand leaves become Slurm's topology tree)."""
    with connect(ctx, url, api_key) as client:
        found = client.slurm_files(name)
    if as_json:
        print_json(found)
        return
    if out_dir is None:
        for file_name, text in found.files.items():
            out.print(f"# --- {file_name}", soft_wrap=True)
            out.print(text, end="", soft_wrap=True, markup=False)
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    for file_name, text in found.files.items():
        (out_dir / file_name).write_text(text)
    written = ", ".join(sorted(found.files))
    out.print(
        f"wrote {written} to {out_dir}: copy them to /etc/slurm/ on every node", soft_wrap=True
    )
