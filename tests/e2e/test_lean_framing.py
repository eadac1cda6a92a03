"""Frame once, mark always (issue 12) with the real Pi: the framing of memory (R-RECALL-5) is
stated once where it stays in the cached prefix, and that prefix stays byte-identical across
turns and processes (R-RECALL-6).

- Pi 0.73.1 (no system prompt sections): the session's first memory block carries the framing;
  it stays in the history, so later requests extend the earlier ones exactly.
- Pi 1.x: the shim sets the framing as the system prompt section ``hindsight-memory-guide`` on
  every run (Pi drops a section a run does not set); no block carries it, every block is marked,
  and the leading system message is the same bytes on every request — a trivial prompt that
  gets no memory and a new process included.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from pi_hindsight.engine.memory_block import FRAMING, MARK
from pi_hindsight.hosts.pi.naming import FRAMING_SECTION
from tests.plugins.pi import PiWorld, make_repo
from tests.plugins.pi_versions import PiInstall
from tests.support.pi_requests import FACT, QUESTION, memory_after, messages_of, text_of

pytestmark = [pytest.mark.server, pytest.mark.pi]

SECOND_FACT = "Our staging database is called Quasar."
PROMPTS = (QUESTION, "What is the staging database called?", "ok")


def _system(messages: list[dict[str, Any]]) -> str:
    first = messages[0]
    assert first.get("role") in ("system", "developer"), first
    return text_of(first.get("content"))


def _blocks(messages: list[dict[str, Any]]) -> list[str]:
    return [
        text
        for message in messages
        if message.get("role") == "user"
        and (text := text_of(message.get("content"))).startswith("<hindsight-memory")
    ]


@pytest.mark.pi_both("framing")
def test_the_framing_is_stated_once_and_the_prefix_stays_byte_identical(
    pi_world: PiWorld, pi_binary: PiInstall, tmp_path: Path
) -> None:
    config_path = pi_world.state_dir / "config.json"
    config = json.loads(config_path.read_text())
    config["recall"] = {"timeoutMs": 30_000}  # about framing, not recall's time bound
    config_path.write_text(json.dumps(config))
    repo = make_repo(tmp_path / "lean", "https://example.com/team/lean.git")
    pi_world.register(repo)
    pi_world.run(repo, FACT, SECOND_FACT)
    pi_world.drain()
    before = len(pi_world.pi_requests())

    pi_world.run(repo, PROMPTS[0])
    for prompt in PROMPTS[1:]:  # the same session, each in a new process
        pi_world.run(repo, prompt, args=("--continue",))

    sequences = [messages_of(request) for request in pi_world.pi_requests()[before:]]
    assert len(sequences) == len(PROMPTS)
    for earlier, later in itertools.pairwise(sequences):
        assert later[: len(earlier)] == earlier, "a provider request was not a prefix of the next"
    first_block = memory_after(sequences[0], PROMPTS[0])
    assert first_block is not None and "Zephyr" in first_block
    blocks = _blocks(sequences[-1])
    systems = {_system(messages) for messages in sequences}
    assert len(systems) == 1, "the leading system message changed between requests"
    (system,) = systems

    section = f"<{FRAMING_SECTION}>\n{FRAMING}\n</{FRAMING_SECTION}>"
    if pi_binary.major >= 1:
        # Pi 1.x: the framing is a system prompt section, set on every run (the trivial "ok"
        # got no memory and kept it); no block repeats it, each carries the mark.
        assert section in system
        assert all(FRAMING not in block and block.splitlines()[1] == MARK for block in blocks)
    else:
        # Pi 0.73.1: the first block states it once; later blocks carry only the mark.
        assert FRAMING_SECTION not in system
        assert FRAMING in first_block
        assert all(FRAMING not in block for block in blocks[1:])
        assert all(block.splitlines()[1] == MARK for block in blocks[1:])
    assert sum(FRAMING in text for text in (system, *blocks)) == 1  # stated exactly once
