"""Templates and selected-bank maintenance from inside Pi: commands and the agent's tool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.plugins.pi import PiWorld, make_repo
from tests.support.pi_confirm import agree_to_command
from tests.support.pi_requests import last_tool_result, script_tool_call

pytestmark = [pytest.mark.server, pytest.mark.pi]


def _models(world: PiWorld, repo: Path) -> list[dict[str, object]]:
    listed = json.loads(world.cli("bank", "models", "list", "--cwd", str(repo), "--json").stdout)
    return listed if isinstance(listed, list) else listed["models"]


def test_template_apply_previews_first_asks_and_applies_exactly_that(
    pi_world: PiWorld, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "tpl", "https://example.com/team/tpl.git")
    pi_world.register(repo)
    pi_world.run(repo, "hello")  # the first request creates the scope's bank
    listed = pi_world.run(repo, "/hindsight:templates")
    assert "coding-project" in listed.stdout + listed.stderr
    assert "personal-preferences" in listed.stdout + listed.stderr

    # Without a UI the command only previews; nothing changes.
    before = _models(pi_world, repo)
    previewed = pi_world.run(repo, "/hindsight:template-apply coding-project")
    assert "Not applied" in previewed.stdout + previewed.stderr
    assert _models(pi_world, repo) == before

    ask = agree_to_command(
        pi_world,
        repo,
        "/hindsight:template-apply coding-project",
        lambda said: "coding-project" in said,
        "the applied report",
    )
    assert "coding-project" in ask["title"] and "Architecture" in ask["message"]
    names = {str(model.get("name")) for model in _models(pi_world, repo)}
    assert {"Architecture", "Engineering decisions"} <= {name.split(" (")[0] for name in names}


def test_the_agent_maintains_mental_models_dry_run_first(pi_world: PiWorld, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "models", "https://example.com/team/models.git")
    pi_world.register(repo)
    pi_world.run(repo, "hello")
    arguments = {
        "action": "mental_models",
        "modelAction": "create",
        "name": "Release process",
        "sourceQuery": "How do we release?",
    }
    script_tool_call(pi_world, "plan a model", "hindsight_memory", arguments)
    pi_world.run(repo, "Please plan a model for releases.")
    assert "Dry run" in last_tool_result(pi_world)
    assert not any(model.get("name") == "Release process" for model in _models(pi_world, repo))

    script_tool_call(pi_world, "create the model", "hindsight_memory", {**arguments, "apply": True})
    pi_world.run(repo, "Please create the model for releases.")
    created = [model for model in _models(pi_world, repo) if model.get("name") == "Release process"]
    assert len(created) == 1
    assert created[0].get("tags") == ["project:example.com/team/models"]

    script_tool_call(pi_world, "show the mission", "hindsight_memory", {"action": "mission"})
    pi_world.run(repo, "Please show the mission.")
    assert "mission" in last_tool_result(pi_world).lower()
