"""Two people on one team server, end to end (issue 20: "Done when"): the real Pi 1.x with our
extension, the real Hindsight with an API key (``tests/plugins/team_server.py``), the User bank
on for both, and every proxy variable of their environment pointing at a closed port (a corporate
proxy the local traffic must never go through). ``NO_PROXY`` names only the model stand-in's
``host:port`` (Pi itself follows the proxy variables, through undici); the team's server, on
another loopback port, is not in it — we never send loopback traffic to a proxy, whatever
``NO_PROXY`` says, where aiohttp's own rules (the host alone) would have sent it there.

Alice and Bob work in clones of one repository, each with their own Pi agent dir and state dir.
Neither sets a User bank id: Alice sets ``bankNaming.userId``, Bob relies on the OS account (both
run as the same account on this machine, so only one of them can). Alice's
``hindsight_retain_global`` preference reaches Alice's later session and never Bob's; the
project's memory reaches both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pi_hindsight.cli.setup_cmd import install_extension
from pi_hindsight.user_bank import os_account, personal_bank_id
from tests.agent_models import AgentStandIn
from tests.plugins.pi import PI_TIMEOUT_S, make_repo, run_cli
from tests.plugins.pi_versions import PiInstall
from tests.plugins.standin import pi_env, write_pi_agent_dir
from tests.plugins.team_server import TeamServer
from tests.support.retain import BankView

pytestmark = [pytest.mark.server, pytest.mark.pi, pytest.mark.pi_only("1.x")]

CLOSED_PROXY = "http://127.0.0.1:9"  # nothing listens on the discard port
PROXIES = dict.fromkeys(
    ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"),
    CLOSED_PROXY,
)
KEY_VAR = "TEAM_HINDSIGHT_KEY"  # what each person's config names
REMOTE = "git@example.com:team/shared-app.git"


@dataclass
class Person:
    name: str
    pi: PiInstall
    agent_dir: Path
    state_dir: Path
    repo: Path
    key: str
    model: str  # the stand-in's host:port, Pi's own traffic
    outputs: list[str]

    def env(self) -> dict[str, str]:
        env = pi_env(self.agent_dir, pi=self.pi)
        for name in ("HINDSIGHT_API_KEY", "HINDSIGHT_BASE_URL"):
            env.pop(name, None)
        proxies = {**PROXIES, "NO_PROXY": self.model, "no_proxy": self.model}
        return {**env, **proxies, "PI_HINDSIGHT_STATE_DIR": str(self.state_dir), KEY_VAR: self.key}

    def pi_run(self, *prompts: str) -> None:
        completed = subprocess.run(
            self.pi.argv("-p", *prompts),
            cwd=self.repo,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=PI_TIMEOUT_S * 2,
            check=False,
        )
        self.outputs += [completed.stdout, completed.stderr]
        assert completed.returncode == 0, completed.stderr

    def cli(self, *args: str) -> str:
        completed = run_cli(args, env=self.env(), timeout=PI_TIMEOUT_S, check=True)
        self.outputs += [completed.stdout, completed.stderr]
        return completed.stdout


def _person(
    name: str,
    root: Path,
    server: TeamServer,
    pi: PiInstall,
    standin: AgentStandIn,
    naming: dict[str, Any],
) -> Person:
    agent, state = root / "agent", root / "state"
    write_pi_agent_dir(agent, standin)
    install_extension(agent, sys.executable, state)
    state.mkdir(parents=True, exist_ok=True)
    config = {
        "hindsight": {"baseUrl": server.base_url, "apiKey": {"source": "env", "name": KEY_VAR}},
        "profile": "project+user",  # the User bank on; no banks.user.bankId of their own
        "recall": {"timeoutMs": 30_000},  # a loaded 2-core machine (as pi_world)
        **naming,
    }
    (state / "config.json").write_text(json.dumps(config), encoding="utf-8")
    model = urlsplit(standin.pi_base_url).netloc
    person = Person(name, pi, agent, state, make_repo(root / "app", REMOTE), server.key, model, [])
    person.cli("scope", "register", str(person.repo))
    return person


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _requests_with(standin: AgentStandIn, prompt: str) -> list[str]:
    """Every provider request (as text) whose messages hold the user message ``prompt``."""
    found = []
    for request in standin.requests("pi"):
        messages = request["body"]["messages"]  # type: ignore[index]
        if any(m.get("role") == "user" and _text(m.get("content")) == prompt for m in messages):
            found.append(json.dumps(request["body"]))
    return found


def test_two_people_share_the_projects_memory_and_keep_their_own_preferences(
    pi_binary: PiInstall,
    chat_standin: AgentStandIn,
    team_server: TeamServer,
    tmp_path: Path,
) -> None:
    alice_id = f"alice-{uuid.uuid4().hex[:8]}"
    alice = _person(
        "alice", tmp_path / "alice", team_server, pi_binary, chat_standin,
        {"bankNaming": {"userId": alice_id}},
    )  # fmt: skip
    bob = _person("bob", tmp_path / "bob", team_server, pi_binary, chat_standin, {})
    preference = f"Alice always wants {uuid.uuid4().hex[:8]}-style commit messages."
    project_fact = f"The shared app deploys to the {uuid.uuid4().hex[:8]} cluster."

    for person, expected in ((alice, personal_bank_id(alice_id)), (bob, None)):
        status = json.loads(person.cli("status", "--cwd", str(person.repo), "--json"))
        user_bank = status["config"]["userBank"]
        assert user_bank["kind"] == "personal" and user_bank["sharedServer"] is True
        assert status["recall"]["userBankId"] == (expected or personal_bank_id(os_account()))
        assert status["server"]["healthy"] is True, status["server"]
        assert status["server"]["proxy"]["reason"] == "loopback"
    assert personal_bank_id(alice_id) != personal_bank_id(os_account())

    chat_standin.set_script(
        {
            "rules": [
                {
                    "match": "remember everywhere",
                    "tool_calls": [
                        {"name": "hindsight_retain_global", "arguments": {"content": preference}}
                    ],
                    "then_reply": "TOOL SAID: {tool_result}",
                }
            ],
            "default_reply": "Understood.",
        }
    )
    # Alice: the project's fact (automatic retain), then her preference, on purpose.
    alice.pi_run(f"Remember: {project_fact}", "Please remember everywhere how I like commits.")
    alice.cli("outbox", "drain", "--timeout", "180")

    project_question = "Where does the shared app deploy?"
    preference_question = "How should commit messages be written?"
    bob.pi_run(project_question, preference_question)
    alice_question = "Remind me: how do I want commit messages?"
    alice.pi_run(alice_question)

    cluster = project_fact.split(" the ")[1].split(maxsplit=1)[0]
    marker = preference.split()[3]  # the random part of the preference
    # Bob's session: every provider request of it holds his first prompt; the first is its own.
    bob_requests = _requests_with(chat_standin, project_question)
    assert len(bob_requests) >= 2 and preference_question in bob_requests[-1]
    assert cluster in bob_requests[0]  # the project's memory reaches Bob
    for request in bob_requests:
        assert marker not in request  # Alice's preference never does
    alice_later = _requests_with(chat_standin, alice_question)[0]
    assert marker in alice_later  # it reaches Alice herself: the User bank works

    # On the server: the preference is in Alice's User bank alone.
    def held(bank: str) -> str:
        return json.dumps(BankView(team_server.base_url, bank, api_key=team_server.key).memories())

    assert marker in held(personal_bank_id(alice_id))
    assert marker not in held(personal_bank_id(os_account()))

    for person in (alice, bob):
        for text in person.outputs:
            assert team_server.key not in text
        for directory in (person.state_dir, person.agent_dir):
            for path in directory.rglob("*"):
                if path.is_file():
                    assert team_server.key.encode() not in path.read_bytes(), path
    assert os.environ.get(KEY_VAR) is None  # the key lived only in their environments
