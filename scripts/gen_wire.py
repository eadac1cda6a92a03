"""Write the generated wire views: src/pi_hindsight/shim/wire.ts and docs/rpc.md's shapes section.

python scripts/gen_wire.py           # write both
python scripts/gen_wire.py --check   # exit 1 when either is out of date (what the test does)
"""

from __future__ import annotations

import sys
from pathlib import Path

from pi_hindsight.hosts.pi.wire_codegen import splice_markdown, typescript

ROOT = Path(__file__).resolve().parents[1]
TS = ROOT / "src" / "pi_hindsight" / "shim" / "wire.ts"
DOC = ROOT / "docs" / "rpc.md"


def main(argv: list[str]) -> int:
    wanted = {TS: typescript(), DOC: splice_markdown(DOC.read_text(encoding="utf-8"))}
    stale = [path for path, text in wanted.items() if path.read_text(encoding="utf-8") != text]
    if "--check" in argv:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is out of date: run python scripts/gen_wire.py")
        return 1 if stale else 0
    for path in stale:
        path.write_text(wanted[path], encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
