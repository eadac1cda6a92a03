"""Where ``hindsight.apiKey`` comes from when it is not written in the file: an environment
variable or a key file, named by a reference in the user config.

    "apiKey": {"source": "env", "name": "HINDSIGHT_TEAM_KEY"}
    "apiKey": {"source": "file", "path": "~/.config/hindsight/team.key"}

A key file holds the key alone (surrounding blanks and the final newline are dropped); it is
read safely (``safe_files``: a regular file, at most 4 KB, UTF-8) and should be owner-only — a
file others can read is used, with a warning. The key is never echoed: problems name the
variable or the file, never what it holds.

A running session follows a key file that changes (``credentials.RotatingKey`` re-reads the
config when the config file or the key file changes); this module only resolves it once.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pi_hindsight.config.display import ConfigProblem, shown_key
from pi_hindsight.errors import InputFileError
from pi_hindsight.safe_files import decode_utf8, lone_surrogate_paths, printable, read_bytes

KEY_FILE_MAX_BYTES = 4_096
_REFERENCE_FIX = 'use {"source": "env", "name": "VARIABLE"} or {"source": "file", "path": "/abs"}'


def key_file_path(raw: Mapping[str, Any]) -> Path | None:
    """The key file a user config's ``hindsight.apiKey`` names, if it names one."""
    hindsight = raw.get("hindsight")
    reference = hindsight.get("apiKey") if isinstance(hindsight, Mapping) else None
    if not isinstance(reference, Mapping) or reference.get("source") != "file":
        return None
    path = reference.get("path")
    if not isinstance(path, str) or not path or lone_surrogate_paths(path):
        return None
    expanded = Path(path).expanduser()
    return expanded if expanded.is_absolute() else None


def _problem(
    source: str, message: str, fix: str, level: Literal["info", "warning"] = "warning"
) -> ConfigProblem:

    return ConfigProblem(source, "hindsight.apiKey", message, fix, level)


def _from_env(
    name: str, env: Mapping[str, str], source: str
) -> tuple[str | None, list[ConfigProblem]]:
    value = env.get(name)
    if value and lone_surrogate_paths(value):
        return None, [
            _problem(
                source,
                f"environment variable {shown_key(name)} is not valid UTF-8 text",
                "set it to the key as text",
            )
        ]
    if value:
        return value, []
    return None, [
        _problem(
            source,
            f"environment variable {shown_key(name)} is not set",
            "export it, or remove the reference",
        )
    ]


def _from_file(path: Path, source: str) -> tuple[str | None, list[ConfigProblem]]:
    shown = printable(str(path), 300)
    try:
        text = decode_utf8(read_bytes(path, max_bytes=KEY_FILE_MAX_BYTES), path).strip()
        mode = path.stat().st_mode
    except (InputFileError, OSError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        return None, [
            _problem(
                source,
                f"the key file {shown} cannot be read: {printable(str(reason), 300)}",
                "write the team's key into it (alone, owner-only: chmod 600), or fix the path",
            )
        ]
    if not text or any(char.isspace() for char in text) or not text.isprintable():
        what = "is empty" if not text else "holds more than one key (blanks or control characters)"
        return None, [
            _problem(source, f"the key file {shown} {what}", "put the key alone in the file")
        ]
    problems = []
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        problems.append(
            _problem(
                source,
                f"the key file {shown} can be read by others (mode {stat.S_IMODE(mode):o})",
                f"chmod 600 {shown}",
            )
        )
    return text, problems


def resolve_secret_refs(
    raw: dict[str, Any], env: Mapping[str, str], source: str
) -> list[ConfigProblem]:
    """Replace a ``hindsight.apiKey`` reference in ``raw`` by the key it names (or drop it,
    reporting why)."""
    hindsight = raw.get("hindsight")
    if not isinstance(hindsight, dict) or not isinstance(hindsight.get("apiKey"), dict):
        return []
    reference = hindsight["apiKey"]
    kind, name = reference.get("source"), reference.get("name")
    if kind == "env" and isinstance(name, str) and name:
        key, problems = _from_env(name, env, source)
    elif kind == "file" and (path := key_file_path(raw)) is not None:
        key, problems = _from_file(path, source)
    elif kind == "file":
        key, problems = (
            None,
            [
                _problem(
                    source,
                    "a key file reference needs an absolute path",
                    '{"source": "file", "path": "/abs/path/team.key"} (~ is allowed)',
                )
            ],
        )
    else:
        key, problems = None, [_problem(source, "unsupported secret reference", _REFERENCE_FIX)]
    if key is None:
        hindsight.pop("apiKey")
    else:
        hindsight["apiKey"] = key
    return problems
