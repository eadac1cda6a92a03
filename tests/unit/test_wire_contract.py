"""The wire is defined once, in Python (hosts/pi/wire.py): the shim's TypeScript types and the
shape reference in docs/rpc.md are generated from it, and this fails when either drifts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pi_hindsight.hosts.pi import wire
from pi_hindsight.hosts.pi.wire_codegen import DOC_BEGIN, DOC_END, splice_markdown, typescript

ROOT = Path(__file__).resolve().parents[2]


def test_the_shims_wire_types_are_generated_from_the_python_models() -> None:
    checked_in = (ROOT / "src" / "pi_hindsight" / "shim" / "wire.ts").read_text(encoding="utf-8")
    assert checked_in == typescript(), "shim/wire.ts is stale: run python scripts/gen_wire.py"


def test_docs_rpc_shapes_are_generated_from_the_python_models() -> None:
    document = (ROOT / "docs" / "rpc.md").read_text(encoding="utf-8")
    assert DOC_BEGIN in document and DOC_END in document
    assert document == splice_markdown(document), "docs/rpc.md is stale: run scripts/gen_wire.py"


def test_results_dump_every_field_and_commands_omit_what_they_do_not_say() -> None:
    turn = wire.TurnResult(queued=1, notices=[]).wire()
    assert turn == {"queued": 1, "notices": []}
    assert wire.CommandResult(text="hi").wire() == {"text": "hi", "level": "info"}


def test_an_engine_notice_has_the_wire_notices_shape() -> None:
    # Notice is a Record (ADR 0010): its JSON is the shape the shim reads, field for field.
    from pydantic import ValidationError

    from pi_hindsight.engine.types import Notice
    from pi_hindsight.hosts.pi.host import notices_wire

    notice = Notice.warning("part of memory is unavailable")
    assert notice == Notice(level="warning", message="part of memory is unavailable")
    assert notice.to_json() == {"level": "warning", "message": "part of memory is unavailable"}
    assert [item.wire() for item in notices_wire([notice])] == [notice.to_json()]
    assert Notice.load(notice.to_json()) == notice
    with pytest.raises(ValidationError, match="level"):
        Notice(level="loud", message="x")  # type: ignore[arg-type]
