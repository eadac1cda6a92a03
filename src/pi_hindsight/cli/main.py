"""The ``pi-hindsight`` command line.

Subcommands are imported lazily so that ``pi-hindsight serve`` (the sidecar Pi spawns) does not pay
for modules it never uses.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from pi_hindsight.errors import PiHindsightError

# name -> "module:attribute" of a click command or group
_SUBCOMMANDS: dict[str, str] = {
    "serve": "pi_hindsight.cli.serve_cmd:serve",
    "setup": "pi_hindsight.cli.setup_cmd:setup",
    "server": "pi_hindsight.cli.server_cmd:server",
    "standin": "pi_hindsight.cli.standin_cmd:standin",
    "scope": "pi_hindsight.cli.scope_cmd:scope",
    "status": "pi_hindsight.cli.status_cmd:status",
    "usage": "pi_hindsight.cli.usage_cmd:usage",
    "outbox": "pi_hindsight.cli.outbox_cmd:outbox",
    "state": "pi_hindsight.cli.state_cmd:state",
    "config": "pi_hindsight.cli.config_cmd:config",
    "memory": "pi_hindsight.cli.memory_cmd:memory",
    "evidence": "pi_hindsight.cli.evidence_cmd:evidence",
    "templates": "pi_hindsight.cli.templates_cmd:templates",
    "bank": "pi_hindsight.cli.bank_cmd:bank",
    "claude-code": "pi_hindsight.cli.claude_code_cmd:claude_code",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _SUBCOMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PiHindsightError as error:
            # Expected failures become a clean message with a hint, never a traceback.
            click.echo(f"error: {error.describe()}", err=True)
            ctx.exit(1)


@click.group(cls=LazyGroup)
@click.version_option(package_name="pi-hindsight")
def cli() -> None:
    """Persistent memory for the Pi coding agent, backed by Hindsight."""


def main() -> None:
    cli(prog_name="pi-hindsight")


if __name__ == "__main__":  # pragma: no cover
    main()
