"""The docs name only files and sections that exist (issue 19: docs/evidence.md named modules that
had been split or removed). Checked: every relative Markdown link (and its ``#section``), and every
inline code span that names a repository path (``src/…``, ``tests/…``) or a module of the package
(``engine/delivery.py``), outside the ADRs. Code blocks are examples and are not checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "pi_hindsight"
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
REPO_PATH = re.compile(
    r"(?:src|tests|scripts|bench|standin|docs|shim-tests)/[\w.-]+(?:/[\w.-]+)*/?"
)
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
MODULE_PATH = re.compile(
    rf"(?:{'|'.join([*SUBPACKAGES, 'shim'])})/[\w.-]+(?:/[\w.-]+)*\.(?:py|ts|json)"
)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _prose(path: Path) -> str:
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces → -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    slugs: set[str] = set()
    for heading in HEADING.findall(_prose(path)):
        slug, n = _slug(heading), 1
        while slug in slugs:  # GitHub numbers repeated headings
            slug, n = f"{_slug(heading)}-{n}", n + 1
        slugs.add(slug)
    return slugs


def _link_problems(doc: Path) -> list[str]:
    problems = []
    for target in LINK.findall(_prose(doc)):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        if not linked.exists():
            problems.append(f"link to a missing file: {target}")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            problems.append(f"link to a missing section: {target}")
    return problems


def _code_problems(doc: Path) -> list[str]:
    problems = []
    for span in CODE.findall(_prose(doc)):
        token = span.strip()
        if REPO_PATH.fullmatch(token) and not (ROOT / token).exists():
            problems.append(f"names a missing path: {token}")
        elif MODULE_PATH.fullmatch(token) and not (PACKAGE / token).exists():
            problems.append(f"names a missing module: {token} (under src/pi_hindsight/)")
    return problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(ROOT)))
def test_a_doc_names_only_what_exists(doc: Path) -> None:
    problems = _link_problems(doc)
    # An ADR records the past: its context may name a file the decision removed.
    if "adr" not in doc.relative_to(ROOT).parts:
        problems += _code_problems(doc)
    assert not problems, f"{doc.relative_to(ROOT)}: " + "; ".join(problems)


def test_the_checks_catch_a_stale_name(tmp_path: Path) -> None:
    doc = tmp_path / "stale.md"
    doc.write_text(
        "# Title\n\nSee `engine/nowhere.py`, `tests/unit/nowhere.py`, [x](nowhere.md) and "
        "[y](#no-such-section).\n\n```\n`src/in/a/code/block.py`\n```\n",
        encoding="utf-8",
    )
    problems = _link_problems(doc) + _code_problems(doc)
    assert sorted(problems) == [
        "link to a missing file: nowhere.md",
        "link to a missing section: #no-such-section",
        "names a missing module: engine/nowhere.py (under src/pi_hindsight/)",
        "names a missing path: tests/unit/nowhere.py",
    ]
