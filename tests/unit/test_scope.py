from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from pi_hindsight.config import Settings
from pi_hindsight.engine.scope import (
    bank_slug,
    choose_project_bank,
    register_location,
    resolve_scope,
)
from pi_hindsight.errors import StateError
from pi_hindsight.identity import resolve_identity
from pi_hindsight.stores.catalog import Catalog
from tests.plugins.pi import make_repo


def _settings(**data: object) -> Settings:
    return Settings.model_validate(data)


def test_domain_bank_is_the_default_and_tags_are_exact(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "a", "https://example.com/t/a.git")
    catalog = Catalog(tmp_path / "state")
    try:
        resolution = resolve_scope(repo, Settings(), catalog)
    finally:
        catalog.close()
    assert resolution.proposed.bank_id == "pi-coding"
    assert resolution.proposed.tags == ("project:example.com/t/a",)
    assert resolution.bank_rule == "domain" and resolution.registered is None


def test_isolated_bank_topology_gives_each_project_its_own_bank(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "a", "https://example.com/t/a.git")
    choice = choose_project_bank(resolve_identity(repo), _settings(topology="isolated-bank"), repo)
    assert choice.bank_id == "pi-coding::example.com-t-a"
    assert "/" not in choice.bank_id


def test_directory_map_wins_over_everything_most_specific_first(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "work" / "a", "https://example.com/t/a.git")
    settings = _settings(
        topology="isolated-bank",
        bankNaming={
            "dynamicBankId": True,
            "directoryBankMap": {str(tmp_path / "work"): "work-bank", str(repo): "a-bank"},
        },
    )
    assert choose_project_bank(resolve_identity(repo), settings, repo / ".").bank_id == "a-bank"
    other = tmp_path / "work" / "b"
    other.mkdir()
    assert choose_project_bank(resolve_identity(other), settings, other).bank_id == "work-bank"


def test_dynamic_ids_join_fields_and_warn_about_placeholders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("USER", raising=False)
    monkeypatch.delenv("LOGNAME", raising=False)
    monkeypatch.delenv("PI_HINDSIGHT_CHANNEL", raising=False)
    repo = make_repo(tmp_path / "a", "https://example.com/t/a.git")
    settings = _settings(
        bankNaming={
            "dynamicBankId": True,
            "dynamicBankGranularity": ["agent", "project", "user", "channel"],
        }
    )
    choice = choose_project_bank(resolve_identity(repo), settings, repo)
    assert choice.bank_id == "pi::example.com-t-a::anonymous::unknown"
    assert len(choice.warnings) == 2
    assert "'user'" in choice.warnings[0] and "anonymous" in choice.warnings[0]
    named = _settings(
        bankNaming={
            "dynamicBankId": True,
            "dynamicBankGranularity": ["agent", "user"],
            "userId": "Ana",
        }
    )
    assert choose_project_bank(resolve_identity(repo), named, repo).bank_id == "pi::ana"


def test_per_session_banks_are_stored_as_a_template(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "a", "https://example.com/t/a.git")
    settings = _settings(
        bankNaming={"dynamicBankId": True, "dynamicBankGranularity": ["agent", "session"]}
    )
    catalog = Catalog(tmp_path / "state")
    try:
        scope = register_location(repo, settings, catalog, consent="cli")
        assert scope.bank_id == "pi::{session}"
        assert scope.bank_for("0195-ABC") == "pi::0195-abc"
    finally:
        catalog.close()


def test_a_registered_scope_keeps_its_bank_when_the_config_changes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "a", "https://example.com/t/a.git")
    catalog = Catalog(tmp_path / "state")
    try:
        register_location(repo, Settings(), catalog, consent="cli")
        resolution = resolve_scope(repo, _settings(topology="isolated-bank"), catalog)
    finally:
        catalog.close()
    assert resolution.registered is not None
    assert resolution.registered.bank_id == "pi-coding"
    assert any("stays in use" in warning for warning in resolution.warnings)


def test_a_pin_from_config_or_registration_wins_over_the_remote(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "a", "https://example.com/t/a.git")
    pinned = _settings(projectPins={str(repo): "acme-shop"})
    catalog = Catalog(tmp_path / "state")
    try:
        assert resolve_scope(repo / ".", pinned, catalog).identity.project_id == "acme-shop"
        other = make_repo(tmp_path / "b", "https://example.com/t/b.git")
        register_location(other, Settings(), catalog, consent="cli", pin="bee")
        resolution = resolve_scope(other, Settings(), catalog)
        assert resolution.identity.project_id == "bee"
        assert resolution.registered is not None and resolution.registered.tags == ("project:bee",)
    finally:
        catalog.close()


def test_a_registered_plain_directory_covers_subdirectories_but_not_repositories_inside(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes"
    (notes / "deep").mkdir(parents=True)
    nested_repo = make_repo(notes / "code", "https://example.com/t/code.git")
    catalog = Catalog(tmp_path / "state")
    try:
        register_location(notes, Settings(), catalog, consent="cli")
        assert resolve_scope(notes / "deep", Settings(), catalog).registered is not None
        assert resolve_scope(nested_repo, Settings(), catalog).registered is None
    finally:
        catalog.close()


def test_export_and_import_carry_ids_tags_pins_and_declines(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "a", "https://example.com/t/a.git")
    source = Catalog(tmp_path / "one")
    try:
        register_location(repo, Settings(), source, consent="cli", pin="alpha")
        source.record_decline(tmp_path, "example.com/t/zzz")
        exported = json.loads(json.dumps(source.export()))
    finally:
        source.close()
    target = Catalog(tmp_path / "two")
    try:
        report = target.import_(exported)
        assert (report.added_scopes, report.added_locations, report.conflicts) == (1, 1, ())
        assert target.import_(exported).unchanged == 1  # idempotent
        resolution = resolve_scope(repo, Settings(), target)
        assert resolution.registered is not None
        assert resolution.registered.tags == ("project:alpha",)
        assert target.declined(tmp_path) is not None
        exported["scopes"][0]["bankId"] = "elsewhere"
        assert target.import_(exported).conflicts  # never silently rewritten
        with pytest.raises(StateError):
            target.import_({"format": "something-else"})
    finally:
        target.close()


def test_declines_are_forgotten_when_the_location_is_registered(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "a", "https://example.com/t/a.git")
    catalog = Catalog(tmp_path / "state")
    try:
        catalog.record_decline(repo, "example.com/t/a")
        assert catalog.declined(repo) is not None
        register_location(repo, Settings(), catalog, consent="cli")
        assert catalog.declined(repo) is None
    finally:
        catalog.close()


def test_another_clone_of_a_registered_project_is_a_new_location_and_is_asked(
    tmp_path: Path,
) -> None:
    """Issue 9, item 5: consent was keyed by project id, so a never-registered clone at another
    path whose remote normalises to a registered project got memory on without being asked."""
    remote = "https://example.com/t/shop.git"
    first = make_repo(tmp_path / "first", remote)
    second = make_repo(tmp_path / "second", remote.replace("https://", "git@").replace("/t", ":t"))
    catalog = Catalog(tmp_path / "state")
    try:
        registered = register_location(first, Settings(), catalog, consent="cli")
        resolution = resolve_scope(second, Settings(), catalog)
        assert resolution.registered is None
        assert resolution.known_elsewhere is not None
        assert resolution.known_elsewhere.scope_id == registered.scope_id
        assert resolution.proposed == registered  # registering here joins that scope
        # A decline at the new location does not switch memory off at the registered one.
        catalog.record_decline(resolution.identity.root, resolution.identity.project_id)
        assert resolve_scope(first, Settings(), catalog).registered == registered
        joined = register_location(second, Settings(), catalog, consent="ui")
        assert joined == registered
        assert resolve_scope(second / ".", Settings(), catalog).registered == registered
    finally:
        catalog.close()


def test_a_worktree_of_a_registered_clone_is_the_same_location(tmp_path: Path) -> None:
    """A worktree shares its clone's common git dir: no second consent, even for a location
    registered before common dirs were recorded (filled in from git on first use)."""
    main = make_repo(tmp_path / "main", "https://example.com/t/wt.git")
    worktree = tmp_path / "feature"
    subprocess.run(
        ["git", "worktree", "add", "-q", str(worktree), "-b", "feature"],
        cwd=main,
        check=True,
        capture_output=True,
    )
    catalog = Catalog(tmp_path / "state")
    try:
        registered = register_location(main, Settings(), catalog, consent="cli")
        assert resolve_scope(worktree, Settings(), catalog).registered == registered
        with sqlite3.connect(catalog.path) as raw:  # as an older version recorded it
            raw.execute("UPDATE locations SET git_common_dir = NULL")
        assert resolve_scope(worktree, Settings(), catalog).registered == registered
    finally:
        catalog.close()


def test_bank_slug() -> None:
    assert bank_slug("GitHub.com/Owner/Repo") == "github.com-owner-repo"
    assert bank_slug("///") == "unnamed"


def test_scope_cli_register_show_export_import(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "a", "https://example.com/t/a.git")
    state = tmp_path / "cli-state"

    def cli(*args: str) -> str:
        import sys

        completed = subprocess.run(
            [sys.executable, "-m", "pi_hindsight", *args, "--state-dir", str(state)],
            capture_output=True,
            text=True,
            check=True,
        )
        return completed.stdout

    registered = json.loads(cli("scope", "register", str(repo), "--json"))
    assert registered["tags"] == ["project:example.com/t/a"]
    shown = json.loads(cli("scope", "show", str(repo), "--json"))
    assert shown["registered"] is True and shown["bankRule"] == "domain"
    export_file = tmp_path / "export.json"
    cli("scope", "export", "--output", str(export_file))
    assert export_file.stat().st_mode & 0o777 == 0o600
    state = tmp_path / "cli-state-2"
    imported = json.loads(cli("scope", "import", str(export_file), "--json"))
    assert imported["added_scopes"] == 1
    listed = json.loads(cli("scope", "list", "--json"))
    assert [scope["scope_id"] for scope in listed] == ["project:example.com/t/a"]
