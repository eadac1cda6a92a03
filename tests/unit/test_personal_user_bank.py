"""Personal stays personal (issue 20, item 1): on a shared server (a key configured, or a URL
that is not loopback) the User bank id is derived per person; a single user on loopback keeps
``pi-user``; an explicit id keeps working and is reported when it is shared. Two people on one
real server: tests/e2e/test_team.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from pi_hindsight.cli.main import cli
from pi_hindsight.config import load_config
from pi_hindsight.user_bank import os_account, personal_bank_id

REMOTE = "https://hindsight.team.example"
KEY = "team-0123456789abcdefghij"


def _state(tmp_path: Path, config: dict[str, Any]) -> Path:
    state = tmp_path / "state"
    state.mkdir(parents=True, exist_ok=True)
    (state / "config.json").write_text(json.dumps(config))
    return state


def test_a_single_user_on_loopback_keeps_pi_user(tmp_path: Path) -> None:
    for config in (
        {},
        {"profile": "project+user"},
        {"hindsight": {"baseUrl": "http://127.0.0.1:8888"}, "profile": "project+user"},
        {"hindsight": {"baseUrl": "http://localhost:8888"}, "profile": "user-only"},
    ):
        loaded = load_config(_state(tmp_path, config), {})
        assert loaded.settings.banks.user.bank_id == "pi-user", config
        assert loaded.user_bank is not None and loaded.user_bank.kind == "local"
        assert loaded.problems == ()


@pytest.mark.parametrize(
    ("config", "env", "reason"),
    [
        ({"hindsight": {"baseUrl": REMOTE}}, {}, "not on this machine"),
        ({}, {"HINDSIGHT_API_KEY": KEY}, "API key"),
        (
            {"hindsight": {"apiKey": {"source": "env", "name": "TEAM_KEY"}}},
            {"TEAM_KEY": KEY},
            "API",
        ),
        # A key named but not set here still means the server is shared: the id does not flip.
        ({"hindsight": {"apiKey": {"source": "env", "name": "TEAM_KEY"}}}, {}, "API key"),
    ],
)
def test_on_a_shared_server_the_user_bank_is_derived_per_person(
    tmp_path: Path, config: dict[str, Any], env: dict[str, str], reason: str
) -> None:
    loaded = load_config(_state(tmp_path, {**config, "profile": "project+user"}), env)
    expected = personal_bank_id(os_account())
    assert loaded.settings.banks.user.bank_id == expected
    choice = loaded.user_bank
    assert choice is not None and choice.kind == "personal"
    assert reason in (choice.shared_reason or "")
    assert choice.describe().startswith(f"{expected} (personal: derived from the OS account ")
    assert loaded.settings.banks.project.bank_id == "pi-coding"  # the team's memory: shared


def test_the_derived_id_is_stable_and_user_id_carries_it_across_machines(tmp_path: Path) -> None:
    config = {"hindsight": {"baseUrl": REMOTE}, "profile": "project+user"}
    first = load_config(_state(tmp_path, config), {}).settings.banks.user.bank_id
    again = load_config(_state(tmp_path, config), {"USER": "someone-else"}).settings
    assert again.banks.user.bank_id == first  # by uid, not $USER
    assert first.startswith("pi-user-") and len(first) == len("pi-user-") + 12
    alice = {**config, "bankNaming": {"userId": "alice"}}
    loaded = load_config(_state(tmp_path, alice), {})
    assert loaded.settings.banks.user.bank_id == personal_bank_id("alice") != first
    assert loaded.user_bank is not None and loaded.user_bank.basis == "bankNaming.userId"
    bob = {**config, "bankNaming": {"userId": "bob"}}
    assert load_config(_state(tmp_path, bob), {}).settings.banks.user.bank_id != (
        loaded.settings.banks.user.bank_id
    )


@given(st.text(min_size=1, max_size=64), st.text(min_size=1, max_size=64))
def test_distinct_people_get_distinct_ids(one: str, other: str) -> None:
    if one != other:
        assert personal_bank_id(one) != personal_bank_id(other)
    assert personal_bank_id(one) == personal_bank_id(one)


def test_an_explicit_shared_id_keeps_working_and_is_warned_about(tmp_path: Path) -> None:
    config = {
        "hindsight": {"baseUrl": REMOTE},
        "profile": "project+user",
        "banks": {"user": {"bankId": "pi-user"}},
    }
    state = _state(tmp_path, config)
    loaded = load_config(state, {})
    assert loaded.settings.banks.user.bank_id == "pi-user"
    assert loaded.user_bank is not None and loaded.user_bank.shared_with_others
    (warning,) = loaded.warnings
    assert warning.key == "banks.user.bankId" and "everyone's old default" in warning.message
    assert "remove banks.user.bankId" in warning.fix
    result = CliRunner().invoke(cli, ["config", "validate", "--state-dir", str(state)])
    assert result.exit_code == 1 and "is set explicitly and the server is shared" in result.output
    # From the environment: the same.
    env_state = _state(tmp_path / "env", {"hindsight": {"baseUrl": REMOTE}, "profile": "user-only"})
    from_env = load_config(env_state, {"PI_HINDSIGHT_USER_BANK_ID": "pi-user"})
    assert from_env.settings.banks.user.bank_id == "pi-user"
    (warning,) = from_env.warnings
    assert warning.source == "PI_HINDSIGHT_USER_BANK_ID"


def test_an_explicit_own_id_is_kept_and_noted_not_warned(tmp_path: Path) -> None:
    config = {
        "hindsight": {"baseUrl": REMOTE},
        "profile": "project+user",
        "banks": {"user": {"bankId": "pi-user-alice"}},
    }
    state = _state(tmp_path, config)
    loaded = load_config(state, {})
    assert loaded.settings.banks.user.bank_id == "pi-user-alice"
    assert loaded.warnings == ()
    (note,) = loaded.problems
    assert note.level == "info" and "everyone who sets the same id" in note.message
    result = CliRunner().invoke(cli, ["config", "validate", "--state-dir", str(state)])
    assert result.exit_code == 0 and "info:" in result.output
    # The User bank off: the generic id is only noted.
    off = {**config, "profile": "project-only", "banks": {"user": {"bankId": "pi-user"}}}
    assert load_config(_state(tmp_path / "off", off), {}).warnings == ()


def test_status_shows_the_user_bank_and_why(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    state = _state(tmp_path, {"hindsight": {"baseUrl": REMOTE}, "profile": "project+user"})
    runner = CliRunner()
    registered = runner.invoke(cli, ["scope", "register", str(repo), "--state-dir", str(state)])
    assert registered.exit_code == 0, registered.output
    shown = runner.invoke(
        cli, ["status", "--cwd", str(repo), "--no-server", "--state-dir", str(state), "--json"]
    )
    data = json.loads(shown.output)
    expected = personal_bank_id(os_account())
    assert data["recall"]["userBankId"] == expected
    assert data["config"]["userBank"]["kind"] == "personal"
    assert data["config"]["userBank"]["sharedServer"] is True
    text = runner.invoke(
        cli, ["status", "--cwd", str(repo), "--no-server", "--state-dir", str(state)]
    ).output
    assert f"user bank: {expected} (personal: derived from the OS account" in text
