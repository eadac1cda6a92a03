"""``pi-hindsight-standin`` (also ``python -m pi_hindsight_standin``): serve until stopped.

The launcher starts this for ``pi-hindsight server start --llm offline`` and waits for the
ready file; tests and demos can run it by hand. It serves until SIGTERM or SIGINT, then stops
cleanly (exit status 0). Standard library only (argparse), so it is up in milliseconds.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from pi_hindsight_standin.errors import ScriptError, StandInError
from pi_hindsight_standin.roles import Handler
from pi_hindsight_standin.server import StandIn

logger = logging.getLogger(__name__)

PROG = "pi-hindsight-standin"


def write_ready_file(path: Path, standin: StandIn) -> None:
    """Write ``{"base_url", "pid", "roles"}`` to ``path`` atomically (temp file + rename)."""
    payload = {
        "base_url": standin.base_url,
        "pid": os.getpid(),
        "roles": {name: standin.url(name) for name in standin.roles},
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


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not in the range 0-65535")
    return port


def load_role(spec: str) -> tuple[str, Handler]:
    """``NAME=MODULE:FACTORY`` → (name, ``FACTORY()``); raise StandInError saying what is wrong."""
    name, equals, target = spec.partition("=")
    module_name, colon, attribute = target.partition(":")
    hint = "give --role NAME=MODULE:FACTORY, e.g. --role pi=tests.agent_models.pi_role:PiRole"
    if not (equals and colon and name and module_name and attribute):
        raise StandInError(f"--role {spec!r} is not NAME=MODULE:FACTORY", hint=hint)
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except ImportError as error:
        raise StandInError(
            f"--role {spec!r}: cannot import {module_name}: {error}", hint=hint
        ) from error
    except AttributeError:
        raise StandInError(
            f"--role {spec!r}: {module_name} has no {attribute}", hint=hint
        ) from None
    handler = factory()
    if not callable(handler):
        raise StandInError(f"--role {spec!r}: {attribute}() did not return a handler", hint=hint)
    return name, handler


def _read_script(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ScriptError(f"{path}: cannot read the script ({error.strerror})") from error
    except ValueError as error:
        raise ScriptError(f"{path}: the script is not valid JSON ({error})") from error


def parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run the deterministic LLM stand-in (not a model) until stopped.",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", metavar="ADDRESS", help="address to bind (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port",
        type=_port,
        metavar="N",
        default=0,
        help="port to bind; 0 (the default) picks a free one (read it from --ready-file)",
    )
    parser.add_argument(
        "--log",
        type=Path,
        dest="log_path",
        metavar="FILE",
        help="append every request body here as JSON lines",
    )
    parser.add_argument(
        "--role",
        action="append",
        default=[],
        metavar="NAME=MODULE:FACTORY",
        help="also serve FACTORY() under /NAME/ (repeatable); hindsight is always served",
    )
    parser.add_argument(
        "--script",
        type=Path,
        metavar="FILE",
        help="script (JSON) for the scripted roles loaded with --role",
    )
    parser.add_argument(
        "--ready-file",
        type=Path,
        metavar="FILE",
        help='once listening, write {"base_url", "pid", "roles"} here',
    )
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    """Parse ``argv``, serve until SIGTERM/SIGINT; the exit status (0, 1 failed, 2 bad usage)."""
    arguments = parser(prog)
    options = arguments.parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO,
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    try:
        roles = dict(load_role(spec) for spec in options.role)
        script = _read_script(options.script) if options.script is not None else None
        standin = StandIn(
            host=options.host, port=options.port, log_path=options.log_path, roles=roles
        )
        if options.script is not None:
            standin.set_script(script)
    except ScriptError as error:
        where = f"--script {options.script}: " if options.script is not None else ""
        arguments.error(where + error.describe())
    except StandInError as error:
        arguments.error(error.describe())
    return _serve(standin, options.ready_file)


def _serve(standin: StandIn, ready_file: Path | None) -> int:
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        logger.info("stand-in received %s; stopping", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with standin:
            if ready_file is not None:
                write_ready_file(ready_file, standin)
            try:
                stop.wait()
            finally:
                if ready_file is not None:
                    _remove_ready_file(ready_file)
    except StandInError as error:
        print(f"error: {error.describe()}", file=sys.stderr)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
