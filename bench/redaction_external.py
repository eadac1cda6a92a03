"""Held-out measurement of secret redaction (issue 18): a corpus nobody here wrote.

Usage::

    PYTHONPATH=src .venv/bin/python bench/redaction_external.py CORPUS.jsonl [--baseline REV]

``CORPUS.jsonl`` holds one case a line: ``{"source", "kind", "text", "secret", "label"}`` where
``label`` is ``secret`` (``secret`` is the value that must not survive), ``plain`` (an ordinary
text that must come back unchanged), ``near-miss`` (looks like a token: a vendor prefix around
a placeholder, a malformed token; must come back unchanged) or ``disputed`` (one peer's detector
must not fire on it, another peer's generic rule flags it: counted apart, as how often it is
redacted, and in neither rate). The corpus is built on the
measuring machine from the public test suites of other secret scanners (gitleaks, detect-secrets,
secretlint, trufflehog) and is not part of this repository: it judges, it is not tuned against in
tests. Nothing is fetched at run time.

A secret counts as caught when its value no longer appears in ``redact(text).text``; a negative
counts as a false positive when the output differs from the input at all.

``--baseline REV`` scores the ``pi_hindsight.redaction`` package of git revision ``REV`` in the
same run (extracted with ``git archive`` into a temporary directory and imported under another
name), so before and after are measured on the same corpus, machine and moment.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "src/pi_hindsight/redaction"

Redactor = Callable[[str], str]


@dataclass
class Tally:
    secrets: int = 0
    caught: int = 0
    plain: int = 0
    plain_fp: int = 0
    near: int = 0
    near_fp: int = 0
    disputed: int = 0
    disputed_flagged: int = 0

    def add(self, label: str, ok: bool) -> None:
        if label == "secret":
            self.secrets += 1
            self.caught += ok
        elif label == "disputed":
            self.disputed += 1
            self.disputed_flagged += not ok
        elif label == "plain":
            self.plain += 1
            self.plain_fp += not ok
        else:
            self.near += 1
            self.near_fp += not ok

    def row(self) -> str:
        def pct(n: int, d: int) -> str:
            return f"{100 * n / d:5.1f}% ({n}/{d})" if d else "    -"

        return (
            f"caught {pct(self.caught, self.secrets):>20}"
            f"  FP plain {pct(self.plain_fp, self.plain):>18}"
            f"  FP near-miss {pct(self.near_fp, self.near):>18}"
            + (
                f"  disputed redacted {pct(self.disputed_flagged, self.disputed)}"
                if self.disputed
                else ""
            )
        )


@dataclass
class Score:
    total: Tally = field(default_factory=Tally)
    by_source: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    by_kind: dict[tuple[str, str], Tally] = field(default_factory=lambda: defaultdict(Tally))
    misses: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    slowest: float = 0.0


def score(redact: Redactor, cases: list[dict[str, str]]) -> Score:
    result = Score()
    for case in cases:
        started = time.perf_counter()
        out = redact(case["text"])
        took = time.perf_counter() - started
        result.seconds += took
        result.slowest = max(result.slowest, took)
        label = case["label"]
        ok = case["secret"] not in out if label == "secret" else out == case["text"]
        for tally in (
            result.total,
            result.by_source[case["source"]],
            result.by_kind[(case["source"], case["kind"])],
        ):
            tally.add(label, ok)
        if not ok and label != "disputed":
            result.misses.append(case)
    return result


# Why a positive was missed (``--why``), judged by rules of this script, not by the redaction
# code under measurement: the issue says a vendor prefix around a stand-in is no secret, and a
# host or an e-mail address protects nothing without a password.
_PREFIX = re.compile(r"^(?:[A-Za-z0-9]{1,12}[_-]){0,3}")
_LOCATOR = re.compile(
    r"^(?:[a-z][a-z0-9+.]*:)?//|^jdbc:|^[\w.+-]+@[\w-]+(?:\.[\w-]+)+$"
    r"|^[\w-]+(?:\.[\w-]+)*\.[a-z]{2,6}$|^\d{1,3}(?:\.\d{1,3}){3}$|^localhost$"
)
_CREDENTIAL_URL = re.compile(r"//[^/@\s:]+:[^/@\s]+@|password=|pwd=", re.IGNORECASE)


def why_missed(secret: str) -> str:
    """``stand-in``: the value after any vendor prefix is one character over a third of it, at
    most four distinct characters, or says EXAMPLE/xxxx (gitleaks lists such as must-not-flag);
    ``locator``: a URL, host, IP or e-mail address without a credential in it; else ``other``."""
    value = secret.strip("\"'{}")
    body = value[_PREFIX.match(value).end() :] or value  # type: ignore[union-attr]
    longest = max((len(m.group()) for m in re.finditer(r"(.)\1*", body)), default=0)
    if (len(body) >= 8 and (longest * 3 > len(body) or len(set(body)) <= 4)) or re.search(
        r"EXAMPLE|xxxx", value
    ):
        return "stand-in"
    if _LOCATOR.search(value) and not _CREDENTIAL_URL.search(value):
        return "locator"
    return "other"


def report_why(misses: list[dict[str, str]]) -> None:
    missed = [case for case in misses if case["label"] == "secret"]
    counts: dict[str, int] = defaultdict(int)
    for case in missed:
        counts[why_missed(case["secret"])] += 1
    shown = ", ".join(f"{why} {n}" for why, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    print(f"   missed secrets by why: {shown} (of {len(missed)})")


def current() -> Redactor:
    from pi_hindsight.redaction import redact

    return lambda text: redact(text).text


def baseline(rev: str, into: Path) -> Redactor:
    """The redaction package of ``rev``, imported as ``_baseline_redaction`` (its absolute
    imports of ``pi_hindsight.redaction`` are rewritten to that name)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, PACKAGE],
        check=True,
        capture_output=True,
    ).stdout
    tar = into / "package.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as fh:
        fh.extractall(into, filter="data")
    package = into / PACKAGE
    for module in package.glob("*.py"):
        text = module.read_text()
        module.write_text(text.replace("pi_hindsight.redaction", "_baseline_redaction"))
    spec = importlib.util.spec_from_file_location(
        "_baseline_redaction", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_baseline_redaction"] = module
    spec.loader.exec_module(module)
    return lambda text: module.redact(text).text


def report(name: str, result: Score, kinds: bool) -> None:
    print(f"== {name}: {result.total.row()}")
    print(
        f"   {len(result.misses)} wrong; {result.seconds * 1000:.0f} ms in all,"
        f" slowest {result.slowest * 1000:.1f} ms"
    )
    for source, tally in sorted(result.by_source.items()):
        print(f"   {source:<15} {tally.row()}")
    if kinds:
        for (source, kind), tally in sorted(result.by_kind.items()):
            print(f"     {source}/{kind:<30} {tally.row()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument(
        "--baseline", metavar="REV", help="also score the redaction package of this git revision"
    )
    parser.add_argument(
        "--kinds", action="store_true", help="print the figures per source and kind"
    )
    parser.add_argument(
        "--misses", type=int, default=0, metavar="N", help="print the first N wrong cases"
    )
    parser.add_argument(
        "--why",
        action="store_true",
        help="sort the missed secrets into stand-ins, locators and the rest",
    )
    args = parser.parse_args()
    cases = [json.loads(line) for line in args.corpus.read_text().splitlines() if line.strip()]
    print(f"corpus {args.corpus}: {len(cases)} cases")
    with tempfile.TemporaryDirectory() as tmp:
        if args.baseline:
            report(
                f"before ({args.baseline})",
                score(baseline(args.baseline, Path(tmp)), cases),
                args.kinds,
            )
        after = score(current(), cases)
    report("after (this tree)", after, args.kinds)
    if args.why:
        report_why(after.misses)
    for case in after.misses[: args.misses]:
        shown = {**case, "why": why_missed(case["secret"])} if case["label"] == "secret" else case
        print(json.dumps(shown))


if __name__ == "__main__":
    main()
