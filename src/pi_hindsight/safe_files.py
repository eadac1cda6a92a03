"""Reading files we do not control: configs, repository files, Pi session files, exports.

Every such read goes through here, so that no file, byte or nesting level can hang the sidecar,
exhaust its memory or end in a traceback:

- only regular files are read: the path is opened once (``O_NONBLOCK``, so a FIFO never blocks
  the open) and ``fstat`` on that descriptor must say "regular file" — a symlink to
  ``/dev/zero``, a FIFO, a socket, a device or a directory is refused by name;
- at most ``max_bytes + 1`` bytes are read, and :class:`FileTooLarge` names the cap;
- text must be UTF-8 (a leading BOM is accepted); :class:`InputFileError` names the byte offset,
  line and column of the first bad byte;
- JSON nesting is bounded *before* parsing (C-speed pre-scan, see :func:`deeper_than`), so
  neither ``json`` nor the pure-Python ``json5`` recurses without bound; syntax errors give the
  line and column, and say so when the cause is a comment or a trailing comma in strict JSON;
- lone UTF-16 surrogate escapes (``"\\ud800"``, which ``json`` accepts) are found, so that nothing
  downstream fails to print or store them.

Failures are :class:`InputFileError` (the file, what is wrong, the fix). Nothing here ever writes
to the files it reads.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pi_hindsight.errors import InputFileError

# Caps (docs/configuration.md, "Bad files"). Config files are a few KB; the caps leave room.
CONFIG_MAX_BYTES = 1_000_000
# JSONC goes through json5, pure Python and slow (~0.6 s for 16 KB of tokens on 2 cores,
# bench/safe_files_bench.py): its cap keeps a hostile repository's `.jsonc` from stalling start.
JSONC_MAX_BYTES = 16_000
CONFIG_MAX_DEPTH = 32  # the schema is 4 levels deep; json5 itself fails beyond ~44
SESSION_MAX_BYTES = 64_000_000  # a Pi session file (images are inline base64)
SESSION_LINE_MAX_BYTES = 16_000_000
SESSION_MAX_DEPTH = 200  # well inside the interpreter's recursion limit for json.dumps later
SESSION_HEADER_MAX_BYTES = 64_000

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class FileMissing(InputFileError):
    """The path does not exist (a dangling symlink included)."""


class NotARegularFile(InputFileError):
    """The path is (or links to) a directory, FIFO, socket or device."""


class FileTooLarge(InputFileError):
    """The file is larger than the reader's cap."""


class BadJson(ValueError):
    """One JSON text (a JSONL line) cannot be used; the message says why, without the input."""


def format_size(size: int) -> str:
    for unit, factor in (("MB", 1_000_000), ("KB", 1_000)):
        if size >= factor:
            return f"{size / factor:g} {unit}"
    return f"{size} bytes"


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: Path, *, max_bytes: int | None = None) -> BinaryIO:
    """Open ``path`` for binary reading if it is a regular file (symlinks followed, checked on
    the opened descriptor); with ``max_bytes``, a larger file is refused. A special file is
    refused before it is opened (opening some devices has effects); the check on the opened
    descriptor closes the race with a swap in between."""
    try:
        before = path.stat()
        if not stat.S_ISREG(before.st_mode):
            raise _not_regular(path, before.st_mode)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except ValueError as error:  # an embedded NUL: no such file can exist
        raise FileMissing(f"{printable(str(path))}: not a usable path", hint="") from error
    except OSError as error:
        kind = FileMissing if isinstance(error, FileNotFoundError) else InputFileError
        raise kind(
            f"{path}: cannot open: {error.strerror or error}",
            hint="check that it exists and is readable",
        ) from error
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(path, info.st_mode)
        if max_bytes is not None and info.st_size > max_bytes:
            raise _too_large(path, max_bytes)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _not_regular(path: Path, mode: int) -> NotARegularFile:
    target = "" if not path.is_symlink() else f" (it links to {os.path.realpath(path)})"
    return NotARegularFile(
        f"{path}: is {_kind(mode)}{target}, not a regular file; not read",
        hint="replace it with a regular file, or remove it",
    )


def _too_large(path: Path, max_bytes: int) -> FileTooLarge:
    return FileTooLarge(
        f"{path}: larger than {format_size(max_bytes)}, the limit for this file; not read",
        hint="shorten it, or remove it",
    )


def read_bytes(path: Path, *, max_bytes: int) -> bytes:
    """The whole of a regular file of at most ``max_bytes`` (it may grow while read: at most
    ``max_bytes + 1`` bytes are ever read)."""
    with open_regular(path, max_bytes=max_bytes) as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as error:
            raise InputFileError(
                f"{path}: cannot read: {error.strerror or error}",
                hint="check the file and its permissions",
            ) from error
    if len(data) > max_bytes:
        raise _too_large(path, max_bytes)
    return data


def decode_utf8(data: bytes, path: Path) -> str:
    """Strict UTF-8 (a leading BOM is dropped); the error names the first bad byte's place."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        offset = error.start
        line = data.count(b"\n", 0, offset) + 1
        column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
        raise InputFileError(
            f"{path}: not UTF-8 text: byte 0x{data[offset]:02x} at offset {offset} "
            f"(line {line}, column {column}) is not valid UTF-8; not read",
            hint="save the file as UTF-8",
        ) from error


# --- nesting depth --------------------------------------------------------------------------

_JSON_STRINGS = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
# JSONC/JSON5 also has single-quoted strings and comments; all are removed in one left-to-right
# pass, so a "//" inside a string is not a comment and a quote inside a comment is not a string.
_JSONC_SKIPPED = re.compile(
    rb'"(?:[^"\\]++|\\.)*+"|\'(?:[^\'\\]++|\\.)*+\'|//[^\n]*+|/\*.*?(?:\*/|\Z)', re.DOTALL
)
_INNERMOST = re.compile(rb"\[\]|\{\}")
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")


def deeper_than(data: bytes, max_depth: int, *, jsonc: bool = False) -> bool:
    """Whether the JSON (or JSONC) text nests arrays/objects more than ``max_depth`` levels.

    Strings (and comments) are removed, the brackets kept, then innermost pairs are deleted
    ``max_depth`` times: each round lowers the depth by one, all at C speed. Text that is not
    well-formed may be over-estimated; the parser reports it anyway."""
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return False  # the bracket count bounds the depth
    pattern = _JSONC_SKIPPED if jsonc else _JSON_STRINGS
    brackets = pattern.sub(b"", data).translate(None, _NOT_BRACKETS)
    for _ in range(max_depth):
        if not brackets:
            return False
        reduced = _INNERMOST.sub(b"", brackets)  # one scan: only the pairs innermost now
        if reduced == brackets:
            return False  # unbalanced: not JSON; the parser says where
        brackets = reduced
    return bool(brackets)


# --- lone surrogates ------------------------------------------------------------------------

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _has_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATES.search(text) is not None


def lone_surrogate_paths(value: object) -> list[tuple[str | int, ...]]:
    """Where (key paths) strings or keys hold lone surrogates; iterative, any depth."""
    try:  # the common case at C speed: nothing to find
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return []
    except (UnicodeEncodeError, TypeError, ValueError, RecursionError):
        pass  # a surrogate somewhere (or not JSON-shaped): walk it
    found: list[tuple[str | int, ...]] = []
    stack: list[tuple[tuple[str | int, ...], object]] = [((), value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, str):
            if _has_surrogate(node):
                found.append(where)
        elif isinstance(node, dict):
            for key, child in node.items():
                if _has_surrogate(key):
                    found.append((*where, key))
                else:
                    stack.append(((*where, key), child))
        elif isinstance(node, list):
            stack.extend(((*where, index), child) for index, child in enumerate(node))
    return sorted(found, key=str)


def scrub_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate (in strings and keys) replaced by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATES.sub("\ufffd", value) if _has_surrogate(value) else value
    if isinstance(value, dict):
        return {scrub_surrogates(key): scrub_surrogates(child) for key, child in value.items()}
    if isinstance(value, list):
        return [scrub_surrogates(child) for child in value]
    return value


def printable(text: str, limit: int = 80) -> str:
    """``text`` safe to show on a terminal: control characters and lone surrogates escaped,
    cut at ``limit`` characters."""
    shown = "".join(
        char if char.isprintable() and not _SURROGATES.match(char) else ascii(char)[1:-1]
        for char in text[:limit]
    )
    return shown if len(text) <= limit else f"{shown}…"


# --- JSON -----------------------------------------------------------------------------------


def _syntax_problem(text: str, error: json.JSONDecodeError, name: str) -> str:
    where = f"line {error.lineno}, column {error.colno}"
    at = text[error.pos : error.pos + 2]
    if at in ("//", "/*"):
        return f"a comment at {where}: {name} is strict JSON; comments are not allowed here"
    if at[:1] in ("}", "]") and text[: error.pos].rstrip().endswith(","):
        return f"a trailing comma before {at[:1]!r} at {where}: JSON does not allow it"
    return f"not valid JSON: {error.msg} at {where}"


def loads(
    data: bytes, path: Path, *, max_depth: int, jsonc: bool = False, comment_fix: str | None = None
) -> Any:
    """Parse a whole file's bytes as JSON (or JSONC with ``jsonc``); InputFileError names the
    place and the fix. ``comment_fix`` is the fix given when strict JSON holds a comment."""
    if deeper_than(data, max_depth, jsonc=jsonc):
        raise InputFileError(
            f"{path}: nested more than {max_depth} levels deep; not read",
            hint="a configuration needs at most 4 levels; fix the file",
        )
    text = decode_utf8(data, path)
    try:
        if jsonc:
            import json5  # noqa: PLC0415 - only for JSONC files

            return json5.loads(text)
        return json.loads(text)
    except json.JSONDecodeError as error:
        comment = text[error.pos : error.pos + 2] in ("//", "/*")
        fix = comment_fix if comment and comment_fix else "fix the syntax"
        raise InputFileError(
            f"{path}: {_syntax_problem(text, error, path.name)}", hint=fix
        ) from error
    except RecursionError as error:  # the pre-scan bounds depth; this is the last guard
        raise InputFileError(
            f"{path}: nested too deeply to parse; not read", hint="fix the file"
        ) from error
    except ValueError as error:  # json5's syntax errors
        raise InputFileError(
            f"{path}: not valid JSONC: {printable(str(error), 200)}", hint="fix the syntax"
        ) from error


def loads_line(raw: bytes, *, max_depth: int) -> Any:
    """One JSON text from a JSONL file, depth-bounded, lone surrogates replaced by U+FFFD.
    Invalid UTF-8 is replaced too (a damaged byte should not cost the whole entry).
    Raises :class:`BadJson` (a ValueError) with a short reason."""
    if deeper_than(raw, max_depth):
        raise BadJson(f"nested more than {max_depth} levels deep")
    try:
        value = json.loads(raw.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as error:
        raise BadJson(f"not JSON ({error.msg} at column {error.colno})") from error
    except (RecursionError, ValueError) as error:
        raise BadJson("not JSON") from error
    if _SURROGATE_ESCAPE.search(raw):
        value = scrub_surrogates(value)
    return value


# --- JSONL ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JsonLines:
    """The readable lines of a JSONL file and what was skipped."""

    values: tuple[tuple[int, Any], ...]  # (line number, value), in file order
    bad_lines: tuple[tuple[int, str], ...]  # (line number, reason); empty lines are not bad
    truncated: bool = False  # stopped at max_lines

    def note(self, path: Path) -> str | None:
        """One line about what was skipped, or None when nothing was."""
        if not self.bad_lines:
            return None
        first = ", ".join(f"{line} ({why})" for line, why in self.bad_lines[:3])
        more = "" if len(self.bad_lines) <= 3 else f", and {len(self.bad_lines) - 3} more"
        return f"{path}: skipped {len(self.bad_lines)} unreadable line(s): {first}{more}"


def _lines(handle: BinaryIO, max_line_bytes: int) -> Iterator[tuple[bytes | None, int]]:
    """(line, bytes consumed); LF only (U+2028 may sit inside JSON strings); None for a line
    longer than ``max_line_bytes``, whose rest is skipped (unread into memory) only if the
    caller asks for the next line."""
    carried = 0
    while True:
        line = handle.readline(max_line_bytes + 1)
        if not line:
            return
        if len(line) <= max_line_bytes or line.endswith(b"\n"):
            yield line, carried + len(line)
            carried = 0
            continue
        yield None, carried + len(line)
        carried = 0
        while line and not line.endswith(b"\n"):
            line = handle.readline(1 << 20)
            carried += len(line)


def read_json_lines(
    path: Path,
    *,
    max_bytes: int | None = SESSION_MAX_BYTES,
    max_line_bytes: int = SESSION_LINE_MAX_BYTES,
    max_depth: int = SESSION_MAX_DEPTH,
    max_lines: int | None = None,
) -> JsonLines:
    """Read a JSONL file line by line: a bad line (overlong, not JSON, too deep) is skipped and
    counted, never fatal. InputFileError when the file cannot be read at all or is larger than
    ``max_bytes`` (also when it grows past it while being read). ``max_lines`` stops early."""
    values: list[tuple[int, Any]] = []
    bad: list[tuple[int, str]] = []
    total = 0
    with open_regular(path, max_bytes=max_bytes) as handle:
        lines = enumerate(_lines(handle, max_line_bytes), start=1)
        try:
            for number, (line, consumed) in lines:
                total += consumed
                if max_bytes is not None and total > max_bytes:
                    raise _too_large(path, max_bytes)
                if line is None:
                    bad.append((number, f"longer than {format_size(max_line_bytes)}"))
                elif line.strip():
                    try:
                        values.append((number, loads_line(line, max_depth=max_depth)))
                    except BadJson as error:
                        bad.append((number, str(error)))
                if max_lines is not None and number >= max_lines:
                    return JsonLines(tuple(values), tuple(bad), truncated=True)
        except OSError as error:
            raise InputFileError(
                f"{path}: cannot read: {error.strerror or error}",
                hint="check the file and its permissions",
            ) from error
    return JsonLines(tuple(values), tuple(bad))
