"""``pi-hindsight claude-code …``: the pieces Claude Code runs — the hook client, the per-user
daemon and the MCP server. ``pi-hindsight setup --host claude-code`` writes them into Claude
Code's settings; the hooks there call ``python -m pi_hindsight.hosts.claude_code.hook`` directly
(no click, no engine), which is what ``hook`` here does too."""

from __future__ import annotations

import sys

import click


@click.group("claude-code")
def claude_code() -> None:
    """Claude Code integration: hook client, daemon, MCP server."""


@claude_code.command()
@click.argument("event")
def hook(event: str) -> None:
    """Handle one Claude Code hook EVENT (the event's JSON on stdin); always exits 0."""
    from pi_hindsight.hosts.claude_code.hook import main  # noqa: PLC0415 - import-light

    sys.exit(main([event]))


@claude_code.command()
@click.option("--stop", is_flag=True, help="Stop the running daemon and wait until it exited.")
def daemon(stop: bool) -> None:
    """Run the per-user daemon in the foreground (the hooks start it on demand), or stop it.

    Which daemon: the one for this environment's state dir and HINDSIGHT_* / PI_HINDSIGHT_*
    variables. It exits by itself after $PI_HINDSIGHT_DAEMON_IDLE_S (default 900) idle seconds.
    """
    from pi_hindsight.hosts.claude_code import daemon as daemon_module  # noqa: PLC0415

    if stop:
        click.echo(daemon_module.stop())
        return
    sys.exit(daemon_module.serve())


@claude_code.command()
def mcp() -> None:
    """Serve the memory tools over MCP on stdio (Claude Code starts it per session)."""
    from pi_hindsight.hosts.claude_code.mcp_server import main  # noqa: PLC0415

    sys.exit(main())
