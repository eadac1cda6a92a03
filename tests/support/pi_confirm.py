"""A slash command that asks first, answered yes in a real interactive (``--mode rpc``) Pi."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.plugins.pi import PiRpc, PiWorld


def agree_to_command(
    world: PiWorld, cwd: Path, command: str, done: Callable[[str], bool], what: str
) -> dict[str, Any]:
    """Send ``command``, answer its question yes, wait for the notice ``done`` accepts (``what``
    names it in a timeout's message); returns the question Pi showed."""
    rpc = PiRpc(world, cwd)
    try:
        rpc.wait_for(lambda e: e.get("method") == "setStatus", "the status line")
        start = len(rpc.events)
        rpc.send({"type": "prompt", "message": command})
        _, ask = rpc.wait_for(
            lambda e: e.get("type") == "extension_ui_request" and e.get("method") == "confirm",
            f"{command} to ask",
            after=start,
        )
        rpc.send({"type": "extension_ui_response", "id": ask["id"], "confirmed": True})
        rpc.wait_for(
            lambda e: e.get("method") == "notify" and done(str(e.get("message"))),
            what,
            after=start,
        )
    finally:
        assert rpc.close() == 0
    return ask
