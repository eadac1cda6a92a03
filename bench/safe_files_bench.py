"""Reading files we do not control (``safe_files``), measured side by side in one run.

- a Pi session file (~20 MB, 4,000 entries with nested tool calls and a few inline images):
  ``read_json_lines`` (regular-file check, per-line cap, depth pre-scan, surrogate scrub) against
  the plain read it replaced (``read_text().split("\\n")`` + ``json.loads`` per line);
- a normal ``config.json`` through ``read_config_file`` against ``json.loads(read_text())``;
- the worst a hostile repository can hand us within the caps: ``load_config`` with 1 MB of strict
  JSON keys in ``.pi/hindsight.json``, and 16 KB of JSONC tokens (json5 is pure Python); plus
  5,000-deep nesting, refused by the pre-scan.

Run: ``.venv/bin/python bench/safe_files_bench.py`` (``--rounds 3`` for a quicker run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pi_hindsight.config import load_config, read_config_file
from pi_hindsight.errors import ConfigError
from pi_hindsight.safe_files import read_json_lines


def _median_ms(action: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def _session(path: Path) -> None:
    image = "A" * 500_000
    with path.open("w", encoding="utf-8") as handle:
        handle.write(json.dumps({"type": "session", "version": 3, "id": "s", "cwd": "/x"}) + "\n")
        for n in range(4_000):
            content: list[dict[str, object]] = [{"type": "text", "text": f"step {n} " * 40}]
            if n % 200 == 0:
                content.append({"type": "image", "data": image, "mimeType": "image/png"})
            arguments = {"path": f"src/f{n}.py", "edits": [{"old": "a" * 80, "new": "b" * 80}] * 3}
            content.append(
                {"type": "toolCall", "id": f"t{n}", "name": "edit", "arguments": arguments}
            )
            entry = {
                "type": "message",
                "id": f"e{n}",
                "parentId": f"e{n - 1}" if n else None,
                "message": {"role": "assistant", "content": content},
            }
            handle.write(json.dumps(entry) + "\n")


def _plain_session(path: Path) -> list[object]:
    values = []
    for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
        if line.strip():
            values.append(json.loads(line))
    return values


def _refused(path: Path) -> None:
    try:
        read_config_file(path)
    except ConfigError:
        return
    raise AssertionError(f"{path} was read")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        session = base / "session.jsonl"
        _session(session)
        size = session.stat().st_size / 1e6
        plain = _median_ms(lambda: _plain_session(session), rounds)
        safe = _median_ms(lambda: read_json_lines(session), rounds)
        print(f"session file ({size:.1f} MB, 4,001 lines)")
        print(f"  plain read + json.loads:  {plain:8.1f} ms")
        print(f"  read_json_lines:          {safe:8.1f} ms   ratio {safe / plain:.2f}")

        config = base / "config.json"
        config.write_text(
            json.dumps({"profile": "project+user", "recall": {"maxTokens": 900, "budget": "mid"}})
        )
        plain = _median_ms(lambda: json.loads(config.read_text()), rounds * 20)
        safe = _median_ms(lambda: read_config_file(config), rounds * 20)
        print("config.json (normal, 70 bytes)")
        print(f"  json.loads(read_text()):  {plain:8.3f} ms")
        print(f"  read_config_file:         {safe:8.3f} ms   ratio {safe / plain:.2f}")

        hostile = base / "repo" / ".pi" / "hindsight.json"
        hostile.parent.mkdir(parents=True)
        hostile.write_text(json.dumps({f"k{n}": [n, {"x": [1, 2]}] for n in range(28_000)}))
        hostile_size = hostile.stat().st_size / 1e6
        state = base / "state"
        normal = _median_ms(lambda: load_config(state, env={}), rounds)
        worst = _median_ms(lambda: load_config(state, env={}, project_root=base / "repo"), rounds)
        print(f"load_config with a hostile repository file ({hostile_size:.2f} MB, 28,000 keys)")
        print(f"  without it:               {normal:8.1f} ms")
        print(f"  with it:                  {worst:8.1f} ms   ratio {worst / normal:.1f}")

        jsonc = base / "hostile.jsonc"
        jsonc.write_text("[" + ",".join(["1"] * 7_900) + "]")
        print(f"hostile JSONC ({jsonc.stat().st_size / 1e3:.1f} KB of tokens, at the 16 KB cap)")
        jsonc_ms = _median_ms(lambda: _refused_or_read(jsonc), rounds)
        print(f"  read_config_file (json5): {jsonc_ms:8.1f} ms")

        deep = base / "deep.json"
        deep.write_text("[" * 5_000 + "]" * 5_000)
        print("5,000-deep nesting (refused by the pre-scan)")
        print(f"  read_config_file:         {_median_ms(lambda: _refused(deep), rounds):8.3f} ms")


def _refused_or_read(path: Path) -> None:
    with contextlib.suppress(ConfigError):
        read_config_file(path)


if __name__ == "__main__":
    main()
