"""``pi-hindsight standin``: run the deterministic LLM stand-in, a package of its own.

The stand-in (``pi-hindsight-standin``, ``standin/`` in this repository) is not part of the
pi-hindsight wheel; this command runs it when it is installed, with the arguments as given
(``pi-hindsight standin --help`` shows its options), and says how to install it otherwise.
"""

from __future__ import annotations

import click

from pi_hindsight.launcher.api_process import require_standin


@click.command(
    context_settings={"ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def standin(ctx: click.Context, arguments: tuple[str, ...]) -> None:
    """Run the deterministic LLM stand-in (not a model) until stopped; --help for its options."""
    require_standin()  # a LauncherError with the install hint when it is missing
    from pi_hindsight_standin.cli import main  # noqa: PLC0415 - a package of its own

    ctx.exit(main(list(arguments), prog="pi-hindsight standin"))
