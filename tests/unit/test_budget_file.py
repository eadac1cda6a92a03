"""The retain-budget pause file is user state other processes write: a damaged one (bad UTF-8,
deep nesting, wrong shapes) reads as no pause, says so in the log, and is rewritten whole."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pi_hindsight.engine.budget import PAUSE_FILE, read_pause, resume

HOSTILE = [
    b"\xff\xfe not utf-8",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"paused": ["a"], "resumed": 3}',
    b'{"paused": {"bank": {"since": "x", "tokens": {}, "budget": null}}}',
    b'"\\ud800"',
    b"",
]


@pytest.mark.parametrize("content", HOSTILE)
def test_a_damaged_pause_file_reads_as_no_pause_and_is_rewritten(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / PAUSE_FILE).write_bytes(content)
    with caplog.at_level(logging.WARNING):
        assert read_pause(tmp_path, "bank") is None
        resume(tmp_path)  # rewrites the file whole
    assert read_pause(tmp_path, "bank") is None
    assert (tmp_path / PAUSE_FILE).read_text(encoding="utf-8").startswith("{")


def test_a_missing_pause_file_is_quiet(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert read_pause(tmp_path, "bank") is None
    assert caplog.records == []
