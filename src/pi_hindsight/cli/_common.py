"""Small helpers shared by CLI commands: state dir option, JSON output."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from pi_hindsight.paths import state_dir as default_state_dir

F = TypeVar("F", bound=Callable[..., Any])
_SURROGATE = re.compile("[\ud800-\udfff]")


def state_dir_option(function: F) -> F:
    return click.option(
        "--state-dir",
        type=click.Path(path_type=Path, file_okay=False),
        default=None,
        help="State directory (default: $PI_HINDSIGHT_STATE_DIR or <pi agent dir>/hindsight).",
    )(function)


def json_option(function: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(function)


def resolve_state_dir(state_dir: Path | None) -> Path:
    return default_state_dir() if state_dir is None else state_dir


def echo_json(value: Any) -> None:
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if not text.isascii() and _SURROGATE.search(text):
        text = json.dumps(value, indent=2, default=str)  # lone surrogates stay \u escapes
    click.echo(text)
