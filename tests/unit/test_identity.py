from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pi_hindsight.identity import normalise_remote, resolve_identity
from tests.plugins.pi import make_repo


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("git@GitHub.com:Owner/Repo.git", "github.com/owner/repo"),
        ("https://github.com/owner/repo", "github.com/owner/repo"),
        ("https://user:secret@github.com/owner/repo.git/", "github.com/owner/repo"),
        (
            "ssh://git@gitlab.example.com:2222/group/sub/proj.git",
            "gitlab.example.com/group/sub/proj",
        ),
        ("/srv/git/repo.git", None),
        ("file:///srv/git/repo.git", None),
        ("", None),
    ],
)
def test_normalise_remote(url: str, expected: str | None) -> None:
    assert normalise_remote(url) == expected


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_remote_wins_and_credentials_never_reach_the_id(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "alpha", "https://bob:hunter2@example.com/Team/Alpha.git")
    identity = resolve_identity(repo / ".")
    assert identity.project_id == "example.com/team/alpha"
    assert identity.source == "git-remote"
    assert "hunter2" not in identity.project_id


def test_worktrees_of_one_repository_share_the_project_id(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "beta")
    _git(repo, "worktree", "add", "-q", str(tmp_path / "beta-wt"), "-b", "feature")
    main = resolve_identity(repo)
    worktree = resolve_identity(tmp_path / "beta-wt")
    assert main.source == "git-common-dir"
    assert main.project_id == worktree.project_id
    assert str(tmp_path) not in main.project_id  # no machine-specific absolute path


def test_plain_directory_id_is_named_and_hashed_not_a_path(tmp_path: Path) -> None:
    directory = tmp_path / "Notes Dir"
    directory.mkdir()
    identity = resolve_identity(directory)
    assert identity.source == "directory"
    assert identity.project_id.startswith("notes-dir-")
    assert "/" not in identity.project_id


def test_subdirectory_of_a_repository_is_the_same_project(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "gamma", "git@example.com:t/gamma.git")
    (repo / "src" / "deep").mkdir(parents=True)
    assert resolve_identity(repo / "src" / "deep").project_id == resolve_identity(repo).project_id
