from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option(
    "--state-dir", type=click.Path(path_type=Path), default=None, help="Override the state dir."
)
def serve(state_dir: Path | None) -> None:
    """Run the sidecar: JSON-RPC 2.0 over stdio (spawned by the Pi extension)."""
    from pi_hindsight.serve import serve_pi  # noqa: PLC0415 - keep CLI start-up light

    serve_pi(state_dir)
