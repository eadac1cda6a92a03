"""``pi-hindsight serve``: the sidecar a Pi session spawns. The transport starts and says
``ready`` first; the composition root (``app``: config, stores, engine, the Pi host) is imported
and built only then, so that its cost overlaps the shim's ``initialize`` (issue 19). Nothing here
imports the engine at module level: ``tests/unit/test_startup_imports.py`` holds it to that."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pi_hindsight.paths import state_dir as default_state_dir
from pi_hindsight.rpc.sidecar import run

if TYPE_CHECKING:
    from pi_hindsight.hosts.pi.host import PiHost


def serve_pi(state_dir: Path | None = None) -> None:
    """The Pi host over the JSON-RPC stdio transport, until stdin closes or a shutdown."""
    directory = default_state_dir() if state_dir is None else state_dir

    def dispatcher() -> PiHost:
        from pi_hindsight.app import pi_host  # noqa: PLC0415 - after ``ready``: see above

        return pi_host(directory)

    run(directory, dispatcher)
