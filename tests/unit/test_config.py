from __future__ import annotations

import json
from pathlib import Path

import pytest

from pi_hindsight.config import load_config


def test_defaults_without_a_file(tmp_path: Path) -> None:
    loaded = load_config(tmp_path, env={})
    assert loaded.problems == ()
    assert loaded.settings.recall.max_tokens == 800
    assert loaded.settings.banks.project.bank_id == "pi-coding"


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps({"hindsight": {"baseUrl": "http://127.0.0.1:1"}})
    )
    loaded = load_config(tmp_path, env={"HINDSIGHT_BASE_URL": "http://127.0.0.1:2"})
    assert loaded.settings.hindsight.base_url == "http://127.0.0.1:2"


def test_an_invalid_value_falls_back_to_its_default_and_names_file_key_and_fix(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"recall": {"maxTokens": -5, "budget": "mid"}, "timeoutMs": 3000}))
    loaded = load_config(tmp_path, env={})
    assert loaded.settings.recall.max_tokens == 800
    assert loaded.settings.timeout_ms == 3000  # the valid keys are kept
    (problem,) = loaded.problems
    assert problem.source == str(path)
    assert problem.key == "recall.maxTokens"
    assert "default" in problem.fix


def test_an_invalid_environment_value_names_the_variable(tmp_path: Path) -> None:
    loaded = load_config(tmp_path, env={"PI_HINDSIGHT_RECALL_TIMEOUT_MS": "soon"})
    (problem,) = loaded.problems
    assert problem.source == "PI_HINDSIGHT_RECALL_TIMEOUT_MS"
    assert loaded.settings.recall.timeout_ms == 4000


def test_unreadable_json_keeps_defaults_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    loaded = load_config(tmp_path, env={})
    assert loaded.settings.recall.max_tokens == 800
    assert "not valid JSON" in loaded.problems[0].message


def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_every_legacy_key_migrates_on_load(tmp_path: Path) -> None:
    _write(
        tmp_path / "config.json",
        {
            "banks": {"global": {"enabled": True, "bankId": "me"}},
            "globalRetain": {"mode": "router"},
            "globalQueryPreamble": "about me",
        },
    )
    loaded = load_config(tmp_path, env={})
    settings = loaded.settings
    assert settings.banks.user.bank_id == "me" and settings.banks.user.enabled
    assert settings.user_retain.mode == "explicit-only"
    assert settings.user_query_preamble == "about me"
    assert settings.profile == "project+user"  # inferred from the legacy bank switches
    keys = {problem.key: problem for problem in loaded.problems}
    assert keys["banks.global"].message == "migrated to banks.user"
    assert keys["globalRetain"].message == "migrated to userRetain"
    assert keys["globalQueryPreamble"].message == "migrated to userQueryPreamble"
    assert "'router' → 'explicit-only'" in keys["userRetain.mode"].message
    assert all(problem.level == "info" for problem in loaded.problems)


def test_user_retain_router_mode_normalises_without_error(tmp_path: Path) -> None:
    _write(tmp_path / "config.json", {"userRetain": {"mode": "router"}})
    loaded = load_config(tmp_path, env={})
    assert loaded.settings.user_retain.mode == "explicit-only"
    assert not loaded.warnings


def test_an_invalid_enum_value_falls_back_with_a_visible_warning(tmp_path: Path) -> None:
    _write(tmp_path / "config.json", {"profile": "everything", "recall": {"budget": "huge"}})
    loaded = load_config(tmp_path, env={})
    assert loaded.settings.profile == "project-only"
    assert loaded.settings.recall.budget == "mid"
    assert {problem.key for problem in loaded.warnings} == {"profile", "recall.budget"}


def test_unknown_keys_warn_and_legacy_unsupported_keys_say_why(tmp_path: Path) -> None:
    _write(
        tmp_path / "config.json",
        {"recal": {"maxTokens": 5}, "recall": {"injectionPosition": "prepend"}},
    )
    loaded = load_config(tmp_path, env={})
    keys = {problem.key: problem for problem in loaded.problems}
    assert keys["recal.maxTokens"].level == "warning"
    assert "unknown key" in keys["recal.maxTokens"].message
    assert "right after the user message" in keys["recall.injectionPosition"].message


def test_the_typescript_extensions_config_is_read_and_mapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = tmp_path / "agent"
    (agent / "hindsight.jsonc").parent.mkdir(parents=True)
    (agent / "hindsight.jsonc").write_text(
        """{
          // written by the TypeScript extension
          "setupComplete": true,
          "hindsight": {"baseUrl": "http://127.0.0.1:9999", "timeoutMs": 30000,
                        "apiKey": {"source": "env", "name": "MY_HS_KEY"}},
          "banks": {"project": {"enabled": true, "derive": "repo"}, "global": {"enabled": false}},
          "recall": {"maxTokens": 600, "userMaxTokens": 300, "injectionPosition": "append"},
          "retain": {"enabled": true, "queuePath": ".pi/hindsight/retain-queue.jsonl"},
        }"""
    )
    state = tmp_path / "state"
    loaded = load_config(state, env={"PI_CODING_AGENT_DIR": str(agent), "MY_HS_KEY": "sekret"})
    settings = loaded.settings
    assert settings.hindsight.base_url == "http://127.0.0.1:9999"
    assert settings.hindsight.api_key == "sekret"
    assert settings.timeout_ms == 30000
    assert settings.recall.max_tokens == 600 and settings.user_max_tokens == 300
    assert settings.profile == "project-only"
    assert loaded.user_source == agent / "hindsight.jsonc"
    messages = " | ".join(problem.describe() for problem in loaded.problems)
    assert "legacy pi-hindsight config" in messages
    assert "retain.queuePath" in messages and "setupComplete" in messages


def test_a_repository_file_cannot_redirect_or_enable_memory(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _write(
        repo / ".pi" / "hindsight.json",
        {
            "enabled": True,
            "hindsight": {"baseUrl": "http://evil.example:80", "apiKey": "x"},
            "banks": {"project": {"bankId": "stolen"}},
            "projectPins": {"/": "victim/project"},
            "recall": {"maxTokens": 5000, "budget": "low"},
            "retain": {"enabled": False},
        },
    )
    _write(tmp_path / "state" / "config.json", {"hindsight": {"baseUrl": "http://127.0.0.1:1"}})
    loaded = load_config(tmp_path / "state", env={}, project_root=repo)
    settings = loaded.settings
    assert settings.hindsight.base_url == "http://127.0.0.1:1"
    assert settings.hindsight.api_key is None
    assert settings.banks.project.bank_id == "pi-coding"
    assert settings.project_pins == {}
    assert settings.recall.max_tokens == 800  # may only lower
    assert settings.recall.budget == "low"
    assert settings.retain.enabled is False  # may switch retain off
    ignored = {
        p.key for p in loaded.problems if p.message.startswith("ignored") and p.level == "warning"
    }
    assert {"enabled", "hindsight.baseUrl", "hindsight.apiKey", "banks.project.bankId"} <= ignored
    assert loaded.sources["recall.budget"] == str(repo / ".pi" / "hindsight.json")


def test_a_repository_file_may_lower_the_budget(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _write(repo / ".pi" / "hindsight.json", {"recall": {"maxTokens": 200}})
    loaded = load_config(tmp_path / "state", env={}, project_root=repo)
    assert loaded.settings.recall.max_tokens == 200


def test_user_max_tokens_defaults_to_half_of_max_tokens(tmp_path: Path) -> None:
    _write(tmp_path / "config.json", {"recall": {"maxTokens": 1000}})
    assert load_config(tmp_path, env={}).settings.user_max_tokens == 500
