"""Write the agent tools' parameter schemas from the operations' argument models.

python scripts/tool_schemas.py           # rewrite src/pi_hindsight/tools/parameters.json
python scripts/tool_schemas.py --check   # exit 1 when it is stale (what the unit test checks)

A session reads the file instead of building pydantic's schemas at start-up.
"""

from __future__ import annotations

import json
import sys

from pi_hindsight.tools.specs import PARAMETERS_FILE, generate_parameters


def render() -> str:
    return json.dumps(generate_parameters(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if PARAMETERS_FILE.read_text(encoding="utf-8") != text:
            print(
                f"{PARAMETERS_FILE} is stale: run python scripts/tool_schemas.py", file=sys.stderr
            )
            return 1
        return 0
    PARAMETERS_FILE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
