"""`safe_files`: the one way we read files we do not control (issue 9), and its readers: Pi
session files, the legacy evidence importer, `scope import`."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_hindsight.cli.main import cli
from pi_hindsight.errors import InputFileError
from pi_hindsight.hosts.pi import session_file as pi_context
from pi_hindsight.hosts.pi.session_file import read_session, session_start_dir
from pi_hindsight.legacy.evidence_formats import Bad, parse_line
from pi_hindsight.legacy.evidence_import import migrate_file
from pi_hindsight.safe_files import (
    FileTooLarge,
    NotARegularFile,
    deeper_than,
    loads,
    lone_surrogate_paths,
    printable,
    read_bytes,
    read_json_lines,
)
from pi_hindsight.stores.evidence import EvidenceLedger
from tests.support.hostile_files import HOSTILE

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("kind", ["devzero-symlink", "fifo", "directory"])
def test_special_files_are_refused_at_once_without_reading(kind: str, tmp_path: Path) -> None:
    """Issue 9: a repository file linked to /dev/zero was read without bound (794 MB in 1.5 s);
    a FIFO would block the open for ever."""
    path = tmp_path / "file"
    HOSTILE[kind][0](path)
    started = time.monotonic()
    with pytest.raises(NotARegularFile) as caught:
        read_bytes(path, max_bytes=1_000)
    assert time.monotonic() - started < 5
    assert str(path) in str(caught.value) and caught.value.hint


def test_a_file_over_the_cap_is_refused_by_name_even_if_it_grows(tmp_path: Path) -> None:
    path = tmp_path / "big"
    HOSTILE["50mb"][0](path)
    with pytest.raises(FileTooLarge, match="larger than 1 MB"):
        read_bytes(path, max_bytes=1_000_000)
    path.write_bytes(b"x" * 1_001)
    with pytest.raises(FileTooLarge):
        read_bytes(path, max_bytes=1_000)
    assert read_bytes(path, max_bytes=1_001) == b"x" * 1_001


def test_not_utf8_names_the_byte_offset_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    with pytest.raises(InputFileError, match=r"byte 0xff at offset 9 \(line 2, column 8\)"):
        loads(b'{\n "a": "\xff"}', path, max_depth=8)


def test_the_users_file_is_never_modified(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    for data in (b'{"a": "\xff"}', b"[" * 100, b'{"a": 1,}', b"\xef\xbb\xbf{}"):
        path.write_bytes(data)
        before = path.stat()
        with contextlib.suppress(InputFileError):
            loads(read_bytes(path, max_bytes=1_000), path, max_depth=8)
        assert path.read_bytes() == data and path.stat().st_mtime_ns == before.st_mtime_ns


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(child) for child in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(child) for child in value), default=0)
    return 0


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\/* ,ab', max_size=8),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\ab', max_size=4), children, max_size=3)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=_json_values, limit=st.integers(min_value=0, max_value=8), indent=st.booleans())
def test_the_depth_pre_scan_agrees_with_the_parsed_depth(
    value: object, limit: int, indent: bool
) -> None:
    """Property: brackets inside strings never count; the pre-scan is exact for JSON."""
    text = json.dumps(value, indent=2 if indent else None).encode()
    assert deeper_than(text, limit) == (_depth(value) > limit)
    assert deeper_than(b"// [[[[\n/* {{{{ */" + text, limit, jsonc=True) == (_depth(value) > limit)


def test_json5_is_never_given_more_than_the_depth_cap(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonc"
    deep = b'{"a": ' * 40 + b"1" + b"}" * 40
    with pytest.raises(InputFileError, match="nested more than 32"):
        loads(deep, path, max_depth=32, jsonc=True)
    assert loads(b'{"a": ' * 5 + b"1" + b"}" * 5, path, max_depth=32, jsonc=True) is not None


def test_lone_surrogates_are_found_anywhere_and_shown_escaped() -> None:
    value = json.loads('{"a": ["ok", "\\ud800"], "\\udfff": 1, "b": "\\ud83d\\ude00"}')
    assert set(lone_surrogate_paths(value)) == {("a", 1), ("\udfff",)}
    assert printable("x\ud800\x1b[1m") == "x\\ud800\\x1b[1m"


# --- JSONL: Pi session files --------------------------------------------------------------


def _session(path: Path, *lines: bytes) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _header(cwd: Path) -> bytes:
    return json.dumps({"type": "session", "version": 3, "id": "s", "cwd": str(cwd)}).encode()


def _message(entry_id: str, parent: str | None, text: str) -> bytes:
    entry = {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "message": {"role": "user", "content": text},
    }
    return json.dumps(entry).encode()


def test_bad_session_lines_are_skipped_counted_and_the_rest_kept(tmp_path: Path) -> None:
    path = _session(
        tmp_path / "s.jsonl",
        _header(tmp_path),
        _message("a", None, "first"),
        b"[" * 5_000,
        b"\xff not json",
        b"x" * 2_000,
        b'{"type": "message", "id": "b", "parentId": "a", "message": '
        b'{"role": "user", "content": "lone \\ud800"}}',
    )
    lines = read_json_lines(path, max_line_bytes=1_000)
    assert [number for number, _ in lines.bad_lines] == [3, 4, 5]
    note = lines.note(path)
    assert note is not None and "skipped 3 unreadable line(s)" in note
    session = pi_context.read_session_file(path)
    assert session is not None and session.cwd == str(tmp_path)
    turns = pi_context.recent_turns(session.entries, 5)
    assert turns == [("user", "first"), ("user", "lone \ufffd")]
    explained = read_session(path)
    assert explained.bad_lines == (3, 4, 5) and len(explained.entries) == 2


@pytest.mark.parametrize("kind", ["devzero-symlink", "fifo", "directory", "50mb", "not-utf8"])
def test_a_hostile_session_file_is_no_session_and_keeps_the_directory(
    kind: str, tmp_path: Path
) -> None:
    path = tmp_path / "s.jsonl"
    HOSTILE[kind][0](path)
    assert pi_context.read_session_file(path) is None
    assert session_start_dir(str(path), tmp_path) == tmp_path


def test_the_header_of_a_huge_session_is_still_read(tmp_path: Path) -> None:
    """The start directory comes from the first line only: the size cap does not apply."""
    start = tmp_path / "start"
    start.mkdir()
    path = _session(tmp_path / "s.jsonl", _header(start))
    with path.open("r+b") as handle:
        handle.truncate(70 * 1024 * 1024)
    assert session_start_dir(str(path), tmp_path) == start
    assert pi_context.read_session_file(path) is None  # over the 64 MB cap for the rest


def test_evidence_explain_reports_an_unreadable_session_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    HOSTILE["devzero-symlink"][0](path)
    with pytest.raises(Exception, match="character device") as caught:
        read_session(path)
    assert "Pi session file" in str(caught.value)


# --- the legacy evidence importer and scope import --------------------------------------


def test_legacy_lines_too_deep_or_with_lone_surrogates_are_bad_or_cleaned() -> None:
    result = parse_line(b"[" * 5_000 + b"]" * 5_000, not_before=0)
    assert isinstance(result, Bad) and "nested" in result.reason
    row: Any = parse_line(
        b'{"request_id": "r", "prepared_at": 1700000000, "outcome": "delivered", '
        b'"query": "q\\ud800", "body": "b\\udfff"}',
        not_before=0,
    )
    assert not isinstance(row, Bad), row
    assert row.body == "b\ufffd"


@pytest.mark.parametrize("kind", ["devzero-symlink", "fifo", "directory"])
def test_legacy_evidence_migration_refuses_special_files(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "legacy.jsonl"
    HOSTILE[kind][0](path)
    ledger = EvidenceLedger(tmp_path / "state", retention_days=30, cap_bytes=50_000_000)
    try:
        with pytest.raises(Exception, match="not a regular file"):
            migrate_file(ledger, path)
    finally:
        ledger.close()


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_scope_import_reports_a_hostile_export_cleanly(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    HOSTILE[kind][0](path)
    result = CliRunner().invoke(cli, ["scope", "import", str(path)])
    assert result.exit_code != 0
    assert isinstance(result.exception, SystemExit), result.exception
    assert "error" in result.output.lower() and "Traceback" not in result.output


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=400))
def test_any_bytes_as_a_session_file_never_raise(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    pi_context.read_session_file(path)
    session_start_dir(str(path), tmp_path)
    read_session(path)
