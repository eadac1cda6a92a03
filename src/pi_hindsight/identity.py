"""Stable project identity (R-SCOPE-5).

Order: an explicit pin → the normalised git remote → the git *common* dir (every worktree of a
repository is one project) → the directory the session started in. Ids never contain a
machine-specific absolute path: path-derived ids are ``<basename>-<short hash of the path>``.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

IdentitySource = Literal["pin", "git-remote", "git-common-dir", "directory"]

_GIT_TIMEOUT_S = 5.0
_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>[^/].*)$")


@dataclass(frozen=True)
class ProjectIdentity:
    project_id: str
    source: IdentitySource
    root: Path  # the directory the identity was read from (repository top level or start dir)
    # The repository's common git dir: every worktree of one clone shares it, so it tells a
    # worktree of a registered clone (the same location) from another clone (a new location).
    git_common_dir: Path | None = None


def _git(cwd: Path, *args: str) -> str | None:
    try:
        completed = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if completed.returncode != 0:
        return None
    return completed.stdout.strip() or None


def normalise_remote(url: str) -> str | None:
    """``git@GitHub.com:Owner/Repo.git`` and ``https://u:p@github.com/Owner/Repo`` →
    ``github.com/owner/repo``. Credentials, ports, schemes and ``.git`` are dropped."""
    url = url.strip()
    if not url:
        return None
    host: str
    path: str
    match = re.match(
        r"^[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^@/]*@)?(?P<host>[^/:]+)(?::\d+)?/(?P<path>.*)$", url
    )
    if match:
        host, path = match["host"], match["path"]
    else:
        scp = _SCP_LIKE.match(url)
        if scp is None:
            return None
        host, path = scp["host"], scp["path"]
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")]
    path = path.strip("/")
    if not path:
        return None
    return f"{host.lower()}/{path.lower()}"


def _path_id(path: Path) -> str:
    resolved = str(path.resolve())
    digest = hashlib.sha256(resolved.encode("utf-8")).hexdigest()[:12]
    name = re.sub(r"[^a-z0-9._-]+", "-", path.resolve().name.lower()).strip("-") or "root"
    return f"{name}-{digest}"


def _remote_url(start_dir: Path) -> str | None:
    """``origin``'s URL, else the first remote's (one git call for all of them)."""
    listing = _git(start_dir, "config", "--get-regexp", r"^remote\..*\.url$")
    if not listing:
        return None
    urls: list[tuple[str, str]] = []
    for line in listing.splitlines():
        key, _, url = line.partition(" ")
        name = key.removeprefix("remote.").removesuffix(".url")
        if url:
            urls.append((name, url))
    for name, url in urls:
        if name == "origin":
            return url
    return urls[0][1] if urls else None


def git_common_dir(directory: Path) -> Path | None:
    """The common git dir of the repository ``directory`` is in, if it is in one."""
    located = _git(directory, "rev-parse", "--path-format=absolute", "--git-common-dir")
    return Path(located).resolve() if located else None


def resolve_identity(start_dir: Path, *, pin: str | None = None) -> ProjectIdentity:
    start_dir = start_dir.resolve()
    located = _git(
        start_dir, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir"
    )
    lines = located.splitlines() if located else []
    if len(lines) != 2:  # not inside a work tree (no repository, or a bare one)
        if pin:
            return ProjectIdentity(project_id=pin, source="pin", root=start_dir)
        return ProjectIdentity(project_id=_path_id(start_dir), source="directory", root=start_dir)
    root, common_path = Path(lines[0]), Path(lines[1]).resolve()
    if pin:
        return ProjectIdentity(project_id=pin, source="pin", root=root, git_common_dir=common_path)
    remote_url = _remote_url(start_dir)
    if remote_url:
        normalised = normalise_remote(remote_url)
        if normalised:
            return ProjectIdentity(
                project_id=normalised, source="git-remote", root=root, git_common_dir=common_path
            )
    # The common dir is `<repo>/.git` for ordinary repositories; name the id after the repo.
    named = common_path.parent if common_path.name == ".git" else common_path
    digest = hashlib.sha256(str(common_path).encode()).hexdigest()[:12]
    name = re.sub(r"[^a-z0-9._-]+", "-", named.name.lower()).strip("-") or "repo"
    return ProjectIdentity(
        project_id=f"{name}-{digest}",
        source="git-common-dir",
        root=root,
        git_common_dir=common_path,
    )
