"""A bounded digest of a repository's history for seeding: commit subjects and bodies, newest
first, at most ``MAX_COMMITS``, in documents of ``RANGE_COMMITS`` commits each.

Each document is named after its range (``git-<project hash>-<oldest>..<newest>``, 12-character
shas), and a re-seed asks git only for the commits that no seeded document covers yet: every
range already queued or in Hindsight is a *marker*, and ``git log HEAD --not <markers>`` leaves
out each marker's commit and all its ancestors. Ranges are cut oldest first and queued in that
order, so a seed killed halfway cuts the rest into exactly the same ranges on the next run.

Git's output is untrusted input: it is read as bytes with a size cap (the process is stopped
beyond it), invalid UTF-8 becomes U+FFFD, a body longer than ``BODY_MAX_CHARS`` is cut with a
mark; each of these is counted. Git runs with no pager, no terminal prompts and fsmonitor off.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

MAX_COMMITS = 300
RANGE_COMMITS = 50
BODY_MAX_CHARS = 2_000
SUBJECT_MAX_CHARS = 300
OUTPUT_MAX_BYTES = 8_000_000
GIT_TIMEOUT_S = 30.0

_FIELD, _RECORD = b"\x1f", b"\x1e"
_SHA = re.compile(r"^[0-9a-f]{7,40}$")
_RANGE_ID = re.compile(r"^git-[0-9a-f]{12}-([0-9a-f]{12})\.\.([0-9a-f]{12})$")


@dataclass(frozen=True)
class Commit:
    sha: str
    date: str  # ISO 8601 (author date)
    subject: str
    body: str


@dataclass
class GitLog:
    commits: list[Commit] = field(default_factory=list)  # newest first
    problems: Counter[str] = field(default_factory=Counter)
    error: str | None = None  # git could not be asked at all


def project_hash(project_id: str) -> str:
    return hashlib.sha256(project_id.encode("utf-8")).hexdigest()[:12]


def queue_key(project_id: str) -> str:
    """The outbox's ordering key for a project's history documents (one at a time)."""
    return f"git-{project_hash(project_id)}"


def range_document(project_id: str, oldest: str, newest: str) -> str:
    return f"git-{project_hash(project_id)}-{oldest[:12]}..{newest[:12]}"


def range_newest(document_id: str, project_id: str) -> str | None:
    """The newest sha a history document of ``project_id`` covers, from its id."""
    match = _RANGE_ID.match(document_id)
    if match is None or not document_id.startswith(f"git-{project_hash(project_id)}-"):
        return None
    return match.group(2)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(GIT_PAGER="cat", PAGER="cat", GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


def _run(root: Path, args: list[str]) -> tuple[bytes, bool, int, str]:
    """(stdout up to the cap, truncated?, exit status, stderr head)."""
    process = subprocess.Popen(
        ["git", "-c", "core.fsmonitor=false", "-c", "log.showSignature=false", *args],
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
    )
    if process.stdout is None or process.stderr is None:  # pragma: no cover - PIPE given
        raise OSError("git's output could not be read")
    try:
        data = process.stdout.read(OUTPUT_MAX_BYTES + 1)
        truncated = len(data) > OUTPUT_MAX_BYTES
        if truncated:
            process.kill()
            data = data[:OUTPUT_MAX_BYTES]
        error = process.stderr.read(4_000)
        status = process.wait(timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return b"", True, -1, "git timed out"
    finally:
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    return data, truncated, status, error.decode("utf-8", "replace").strip()


def _decode(raw: bytes, problems: Counter[str]) -> str:
    text = raw.decode("utf-8", errors="replace")
    if "\ufffd" in text and b"\xef\xbf\xbd" not in raw:
        problems["invalid UTF-8 in git output (replaced)"] += 1
    return text.replace("\x00", "")


def _clip(text: str, limit: int, problems: Counter[str], what: str) -> str:
    if len(text) <= limit:
        return text
    problems[f"{what} longer than {limit} characters (cut)"] += 1
    return f"{text[:limit]}… ({len(text) - limit} characters cut)"


def known_markers(root: Path, candidates: set[str]) -> list[str]:
    """The candidate shas that name commits in this repository (others are left out)."""
    valid = sorted(sha for sha in candidates if _SHA.match(sha))
    if not valid:
        return []
    data, _, _, _ = _run(
        root,
        ["rev-parse", "--verify", "-q", "--end-of-options", *[f"{s}^{{commit}}" for s in valid]],
    )
    # rev-parse stops at the first bad one: check them one by one only when some failed.
    if len(data.split()) == len(valid):
        return valid
    return [
        sha
        for sha in valid
        if _run(root, ["rev-parse", "--verify", "-q", f"{sha}^{{commit}}"])[2] == 0
    ]


def read_history(root: Path, *, markers: list[str], max_commits: int = MAX_COMMITS) -> GitLog:
    """The newest ``max_commits`` commits of HEAD no marker covers, newest first."""
    log = GitLog()
    args = [
        "log",
        "--no-color",
        "--no-decorate",
        f"--max-count={max_commits}",
        "--format=%H%x1f%aI%x1f%s%x1f%b%x1e",
        "HEAD",
    ]
    if markers:
        args += ["--not", *markers]
    try:
        data, truncated, status, error = _run(root, args)
    except OSError as failure:
        log.error = f"git could not be run: {failure}"
        return log
    if status != 0 and not truncated:
        log.error = f"git log failed: {error or f'exit status {status}'}"
        return log
    if truncated:
        log.problems[f"git output over {OUTPUT_MAX_BYTES} bytes (the rest was not read)"] += 1
    records = data.split(_RECORD)
    if truncated:
        records = records[:-1]  # the last one is cut off
    for record in records:
        parts = record.strip(b"\n").split(_FIELD)
        if len(parts) != 4:
            if record.strip():
                log.problems["unreadable git log record (skipped)"] += 1
            continue
        sha = parts[0].decode("ascii", "replace").strip()
        if not _SHA.match(sha):
            log.problems["unreadable git log record (skipped)"] += 1
            continue
        log.commits.append(
            Commit(
                sha=sha,
                date=_decode(parts[1], log.problems).strip(),
                subject=_clip(
                    _decode(parts[2], log.problems).strip(),
                    SUBJECT_MAX_CHARS,
                    log.problems,
                    "a commit subject",
                ),
                body=_clip(
                    _decode(parts[3], log.problems).strip(),
                    BODY_MAX_CHARS,
                    log.problems,
                    "a commit body",
                ),
            )
        )
    return log


def ranges(commits: list[Commit], size: int = RANGE_COMMITS) -> list[list[Commit]]:
    """Oldest range first; each range newest first (how its document lists them)."""
    oldest_first = list(reversed(commits))
    chunks = [oldest_first[index : index + size] for index in range(0, len(oldest_first), size)]
    return [list(reversed(chunk)) for chunk in chunks]


def render_range(project_id: str, commits: list[Commit]) -> str:
    newest, oldest = commits[0], commits[-1]
    lines = [
        f"Git history of project {project_id}: {len(commits)} commits from {oldest.date[:10]} "
        f"to {newest.date[:10]}, newest first (commit subject and message).",
    ]
    for commit in commits:
        lines.append("")
        lines.append(f"Commit {commit.sha[:12]} on {commit.date[:10]}: {commit.subject}")
        if commit.body:
            lines.append(commit.body)
    return "\n".join(lines)
