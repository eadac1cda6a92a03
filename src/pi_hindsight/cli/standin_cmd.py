"""``pi-hindsight standin``: run the deterministic LLM stand-in in the foreground.

The launcher starts this for ``pi-hindsight server start --llm offline`` and waits for the
ready file; tests and demos can run it by hand. It serves until SIGTERM or SIGINT, then
stops cleanly (exit status 0).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click

from pi_hindsight.errors import ConfigError
from pi_hindsight.standin import StandIn
from pi_hindsight.standin.pi_role import read_script

logger = logging.getLogger(__name__)


def write_ready_file(path: Path, standin: StandIn) -> None:
    """Write ``{"base_url", "pid", ...}`` to ``path`` atomically (temp file + rename)."""
    payload = {
        "base_url": standin.base_url,
        "pid": os.getpid(),
        "pi_base_url": standin.pi_base_url,
        "hindsight_base_url": standin.hindsight_base_url,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(payload) + "\n", encoding="utf-8")
    temporary.replace(path)


def _remove_ready_file(path: Path) -> None:
    """Remove the ready file if it is still ours, so no one mistakes it for a live server."""
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except FileNotFoundError:
        return
    except (OSError, ValueError) as error:
        logger.warning("could not remove the ready file %s: %s", path, error)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port",
    default=0,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to bind; 0 picks a free one (read it from --ready-file).",
)
@click.option(
    "--log",
    "log_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append every request body here as JSON lines.",
)
@click.option(
    "--script",
    "script_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Pi script (JSON) deciding what the Pi model says.",
)
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help='Once listening, write {"base_url", "pid"} here (atomically).',
)
def standin(
    host: str,
    port: int,
    log_path: Path | None,
    script_path: Path | None,
    ready_file: Path | None,
) -> None:
    """Run the deterministic OpenAI-compatible LLM stand-in (not a model) until stopped."""
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO,
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    try:
        script = read_script(script_path) if script_path is not None else None
    except ConfigError as error:
        raise click.BadParameter(error.describe(), param_hint="--script") from error
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        logger.info("stand-in received %s; stopping", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with StandIn(host=host, port=port, log_path=log_path, script=script) as server:
            if ready_file is not None:
                write_ready_file(ready_file, server)
            try:
                stop.wait()
            finally:
                if ready_file is not None:
                    _remove_ready_file(ready_file)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
