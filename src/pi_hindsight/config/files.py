"""The config files themselves: their names, reading one safely (JSON, or JSONC for ``.jsonc``)
and writing the user's atomically and owner-only."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pi_hindsight.config.display import type_name
from pi_hindsight.errors import ConfigError, InputFileError
from pi_hindsight.paths import ensure_private_dir
from pi_hindsight.safe_files import (
    CONFIG_MAX_BYTES,
    CONFIG_MAX_DEPTH,
    JSONC_MAX_BYTES,
    loads,
    lone_surrogate_paths,
    read_bytes,
)

CONFIG_FILE_NAME = "config.json"
LEGACY_FILE_NAMES = ("hindsight.json", "hindsight.jsonc")
PROJECT_FILE_NAMES = (".pi/hindsight.json", ".pi/hindsight.jsonc")


def _comment_fix(path: Path) -> str:
    if path.name == CONFIG_FILE_NAME:
        return (
            "remove them, or keep a commented config in the legacy <pi agent dir>/hindsight.jsonc "
            "instead (JSONC; read only while config.json is absent)"
        )
    return f"remove them, or rename the file to {path.stem}.jsonc (JSONC allows comments)"


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a JSON (or JSONC for ``.jsonc``) object safely (``safe_files``: regular files only,
    size and depth capped, UTF-8); ConfigError names the file, what is wrong and the fix."""
    jsonc = path.suffix == ".jsonc"
    try:
        data = read_bytes(path, max_bytes=JSONC_MAX_BYTES if jsonc else CONFIG_MAX_BYTES)
        loaded = loads(
            data,
            path,
            max_depth=CONFIG_MAX_DEPTH,
            jsonc=jsonc,
            comment_fix=None if jsonc else _comment_fix(path),
        )
    except InputFileError as error:
        raise ConfigError(str(error), hint=error.hint) from error
    if not isinstance(loaded, dict):
        raise ConfigError(
            f"{path}: the top level is {type_name(loaded)}, not a JSON object; not read",
            hint='put the settings in one object, e.g. {"profile": "project-only"}',
        )
    return loaded


def write_config_file(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as the user config, atomically and owner-only (0600 in a 0700 dir)."""
    ensure_private_dir(path.parent)
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if lone_surrogate_paths(text):  # keep such strings as \\u escapes rather than fail
        text = json.dumps(data, indent=2)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
    temporary.replace(path)
