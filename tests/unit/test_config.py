from __future__ import annotations

import json
from pathlib import Path

from pi_hindsight.config import load_config


def test_defaults_without_a_file(tmp_path: Path) -> None:
    loaded = load_config(tmp_path, env={})
    assert loaded.problems == ()
    assert loaded.settings.recall.max_tokens == 800
    assert loaded.settings.project_bank.bank_id == "pi-coding"


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
    assert "cannot read JSON" in loaded.problems[0].message
