"""The simulated team of ``bench/team_load.py``: one keyed Hindsight on loopback, and people who
each have their own state dir, config, key (in a key file or in an environment variable of their
own), User bank id and repositories — their own, and clones of repositories they share.

Every request carries a fresh token (``rq…``), every personal preference one (``pu…``); the
:class:`Ledger` knows which scope or which person's User bank each token belongs to, so what any
person was delivered can be checked for what it must not hold.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

SERVER_KEY_VAR = "PI_HINDSIGHT_LOAD_SERVER_KEY"  # the bench's own environment, for the launcher
PERSON_KEY_VAR = "TEAM_HINDSIGHT_KEY"  # what an env-keyed person's config names
TOKEN = re.compile(r"\b(?:rq|pu)[0-9a-f]{12}\b")
# Variables of the bench's environment that must not reach a person's processes.
_NOT_INHERITED = ("HINDSIGHT_API_KEY", "HINDSIGHT_BASE_URL", SERVER_KEY_VAR)


def token(kind: str) -> str:
    return f"{kind}{uuid.uuid4().hex[:12]}"


@dataclass
class Person:
    index: int
    name: str
    host: str  # "pi" or "claude-code"
    state_dir: Path
    run_dir: Path  # XDG_RUNTIME_DIR: the Claude Code daemon's socket
    key_file: Path | None  # None: the key is in $PERSON_KEY_VAR of their environment
    key: str
    own_repo: Path
    shared_repo: Path
    user_bank: str = ""  # filled from their status
    scopes: dict[Path, str] = field(default_factory=dict)  # repository -> project id

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
        env.update(PI_HINDSIGHT_STATE_DIR=str(self.state_dir), XDG_RUNTIME_DIR=str(self.run_dir))
        env["PI_HINDSIGHT_DAEMON_IDLE_S"] = "900"
        if self.key_file is None:
            env[PERSON_KEY_VAR] = self.key
        return env

    def cli(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pi_hindsight", *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: pi-hindsight {' '.join(args)}: {done.stderr}")
        return done.stdout

    def write_key(self, key: str) -> None:
        """Replace the key file's content at once (a rename), as a rotation tool would."""
        assert self.key_file is not None
        fresh = self.key_file.with_suffix(".new")
        fresh.write_text(key + "\n", encoding="utf-8")
        fresh.chmod(0o600)
        fresh.replace(self.key_file)


@dataclass(frozen=True)
class Owner:
    """Where a token belongs: a scope's project memory, or one person's User bank."""

    scope: str | None = None  # the project id the token was retained in
    person: str | None = None  # the person whose User bank holds it


@dataclass
class Ledger:
    """Every token handed out, and where it belongs (thread-safe)."""

    owners: dict[str, Owner] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, value: str, owner: Owner) -> None:
        with self.lock:
            self.owners[value] = owner

    def foreign(self, text: str, scope: str, person: str) -> list[str]:
        """Tokens in ``text`` that ``person`` working in ``scope`` must never be given."""
        found = []
        for value in set(TOKEN.findall(text)):
            owner = self.owners.get(value)
            if owner is None:
                continue  # not one of this run's (cannot be: each run has fresh tokens)
            if owner.scope is not None and owner.scope != scope:
                found.append(f"{value} (scope {owner.scope})")
            if owner.person is not None and owner.person != person:
                found.append(f"{value} (User bank of {owner.person})")
        return sorted(found)


def make_repo(path: Path, remote: str) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run(["git", "remote", "add", "origin", remote], cwd=path, check=True)
    return path


def build_people(
    root: Path, base_url: str, key: str, *, people: int, claude: int, run: str, bank: str
) -> list[Person]:
    """``people`` people (the last ``claude`` of them on Claude Code); even ones keep their key
    in a key file, odd ones in their environment. Shared repositories: one per five people."""
    shared = max(1, people // 5)
    found = []
    for index in range(people):
        name = f"p{index:02d}"
        home = root / name
        state, run_dir = home / "state", home / "run"
        state.mkdir(parents=True)
        run_dir.mkdir(mode=0o700)
        key_file = None if index % 2 else home / "team.key"
        reference: dict[str, str] = (
            {"source": "env", "name": PERSON_KEY_VAR}
            if key_file is None
            else {"source": "file", "path": str(key_file)}
        )
        config = {
            "hindsight": {"baseUrl": base_url, "apiKey": reference},
            "profile": "project+user",
            "bankNaming": {"userId": f"{run}-{name}"},
            "banks": {"project": {"bankId": bank}},
            "recall": {"timeoutMs": 20_000},
        }
        (state / "config.json").write_text(json.dumps(config), encoding="utf-8")
        person = Person(
            index=index,
            name=name,
            host="claude-code" if index >= people - claude else "pi",
            state_dir=state,
            run_dir=run_dir,
            key_file=key_file,
            key=key,
            own_repo=make_repo(home / "own", f"https://example.com/{run}/{name}.git"),
            shared_repo=make_repo(
                home / "shared", f"git@example.com:{run}/shared-{index % shared}.git"
            ),
        )
        if key_file is not None:
            person.write_key(key)
        found.append(person)
    with ThreadPoolExecutor(max_workers=4) as pool:  # a few CLI runs each, ~1 s apiece
        list(pool.map(_register, found))
    return found


def _register(person: Person) -> None:
    for repo in (person.own_repo, person.shared_repo):
        person.cli("scope", "register", str(repo))
        shown = person.cli("status", "--cwd", str(repo), "--no-server", "--json")
        status = json.loads(shown)
        person.scopes[repo] = status["projectId"]
        person.user_bank = status["recall"]["userBankId"]


def new_key() -> str:
    return f"team-{secrets.token_urlsafe(24)}"
