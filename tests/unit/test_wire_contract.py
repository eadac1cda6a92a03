"""The wire is defined once, in Python (hosts/pi/wire.py): the shim's TypeScript types and the
shape reference in docs/rpc.md are generated from it, and this fails when either drifts."""

from __future__ import annotations

from pathlib import Path

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
