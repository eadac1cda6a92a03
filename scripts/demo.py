"""`make demo`: watch a second Pi session receive what the first one said, through a real Hindsight.

Everything runs locally and offline: a real Hindsight server (PostgreSQL + pgvector, local
embeddings) started by our launcher, the real Pi binary with our extension, and the deterministic
stand-in in place of the two LLMs (the pi-hindsight-standin package, with the Pi model's role
from tests/agent_models). All state lives under ./.demo and every process is stopped at the
end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Pi's model is the scripted role the tests use (tests/agent_models), not part of any package.
sys.path.insert(0, str(ROOT))

from pi_hindsight.cli.setup_cmd import install_extension  # noqa: E402
from pi_hindsight.launcher import start_server, stop_server  # noqa: E402
from tests.agent_models import AgentStandIn  # noqa: E402
from tests.plugins.pi_versions import PI_INSTALLS, PiInstall  # noqa: E402

DEMO = ROOT / ".demo"

FIRST = (
    "Please remember for this project: production deploys go to the Zephyr cluster in "
    "Frankfurt, and releases ship on Thursdays."
)
SECOND = "When do our releases ship, and where does production run?"


def say(text: str) -> None:
    print(f"\n\033[1m== {text}\033[0m", flush=True)


def run(command: list[str], *, cwd: Path, env: dict[str, str]) -> str:
    completed = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        output = f"{completed.stdout}\n{completed.stderr}"
        raise SystemExit(f"{' '.join(command)} failed ({completed.returncode}):\n{output}")
    return completed.stdout


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def pick_pi() -> PiInstall:
    """Today's Pi (1.x, with its Node 22) where `make install` provided it, else Pi 0.73.1."""
    for pi in reversed(PI_INSTALLS):
        if not pi.unusable():
            return pi
    raise SystemExit("Pi is not installed; run `make install` first")


def main() -> None:
    pi = pick_pi()
    state_dir = DEMO / "agent" / "hindsight"
    server_state = DEMO / "server-state"  # the local server's data is kept between runs
    # Start each run from empty memory (a bank of its own) so an earlier run cannot blur it.
    shutil.rmtree(DEMO / "agent", ignore_errors=True)
    shutil.rmtree(DEMO / "repo", ignore_errors=True)
    bank = f"pi-demo-{time.strftime('%Y%m%d-%H%M%S')}"
    agent_dir = DEMO / "agent"
    repo = DEMO / "repo" / "shop"
    env = dict(
        os.environ,
        PI_CODING_AGENT_DIR=str(agent_dir),
        PI_HINDSIGHT_STATE_DIR=str(state_dir),
        PI_OFFLINE="1",
    )

    say(
        "Starting a local Hindsight (PostgreSQL + pgvector, local embeddings, offline LLM stand-in)"
    )
    info = start_server(server_state, llm="offline")
    print(f"Hindsight is healthy at {info.base_url}")
    try:
        with AgentStandIn(log_path=DEMO / "pi-model-requests.jsonl") as model:
            say("Installing the Pi extension into an isolated Pi agent dir")
            agent_dir.mkdir(parents=True, exist_ok=True)
            (agent_dir / "models.json").write_text(
                json.dumps(
                    {
                        "providers": {
                            "local": {
                                "baseUrl": model.pi_base_url,
                                "api": "openai-completions",
                                "apiKey": "x",
                                "compat": {
                                    "supportsDeveloperRole": False,
                                    "supportsReasoningEffort": False,
                                },
                                "models": [
                                    {"id": "stand-in", "contextWindow": 32000, "maxTokens": 1024}
                                ],
                            }
                        }
                    }
                )
            )
            (agent_dir / "settings.json").write_text(
                json.dumps({"defaultProvider": "local", "defaultModel": "stand-in"})
            )
            print(f"extension: {install_extension(agent_dir, sys.executable)}")
            state_dir.mkdir(parents=True, exist_ok=True)
            (state_dir / "config.json").write_text(
                json.dumps(
                    {
                        "hindsight": {"baseUrl": info.base_url},
                        "banks": {"project": {"bankId": bank}},
                    }
                )
            )

            say("A git repository, registered for memory (registration is consent)")
            repo.mkdir(parents=True)
            for command in (
                ["git", "init", "-q", "-b", "main"],
                ["git", "remote", "add", "origin", "https://example.com/acme/shop.git"],
            ):
                run(command, cwd=repo, env=env)
            print(
                run(
                    [sys.executable, "-m", "pi_hindsight", "scope", "register", str(repo)],
                    cwd=repo,
                    env=env,
                ).rstrip()
            )

            say(f"Session 1 (Pi {pi.version}): pi -p {FIRST!r}")
            print(run(pi.argv("-p", FIRST), cwd=repo, env=pi.env(env)).rstrip())
            print("(waiting until Hindsight confirms the retain…)")
            run(
                [sys.executable, "-m", "pi_hindsight", "outbox", "drain", "--timeout", "120"],
                cwd=repo,
                env=env,
            )

            say(f"Session 2 (a new Pi process): pi -p {SECOND!r}")
            print(run(pi.argv("-p", SECOND), cwd=repo, env=pi.env(env)).rstrip())

            say("What reached the model provider in session 2 (from the stand-in's request log)")
            request = model.requests("pi")[-1]
            for message in request["body"]["messages"]:
                content = text_of(message.get("content"))
                if message["role"] == "system":
                    print(f"[system] ({len(content)} chars)")
                    continue
                print(f"[{message['role']}]")
                print(textwrap.indent(content, "    "))
            memory = text_of(request["body"]["messages"][-1]["content"])
            if "Zephyr" not in memory or not memory.startswith("<hindsight-memory"):
                raise SystemExit("demo failed: session 2 did not receive the memory")
            say("Session 2 received session 1's facts as a hidden message right after its prompt.")
    finally:
        report = stop_server(server_state)
        print(f"\nstopped the local Hindsight ({report.to_json()})")


if __name__ == "__main__":
    main()
