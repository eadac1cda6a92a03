"""The runs of name characters around a secret word (``DB_PASSWORD``, ``my.api-token``) and
the text they are searched in: split from :mod:`.finder`, which asks for them.

A run is the stretch of name characters (letters, digits, ``_``, ``.``, ``-``) holding an
occurrence of a secret word; it is worked out once per text and shared by the detectors
(``source.cache``). The searchable text is the lowered text with the spans the token and block
detectors found blanked out, so a word inside a vendor token or a key block is no name.
"""

from __future__ import annotations

import re

from pi_hindsight.redaction.names import VENDOR_WORDS, NameHit, name_strength, prose_key
from pi_hindsight.redaction.service_names import SERVICE_NAMES, find_service
from pi_hindsight.redaction.source import Source

__all__ = ["RUN_LIMIT", "find_run", "run_name", "run_start", "searchable"]

_NAME_LOWER = "abcdefghijklmnopqrstuvwxyz0123456789_.-"  # name characters of the lowered text
_NAME_RUN = re.compile(r"[a-z0-9_.-]++")
_SERVICES = frozenset(SERVICE_NAMES)
_VENDOR = re.compile("|".join(word for word in VENDOR_WORDS if word not in _SERVICES))
_MARKER_LOWERED = "[redacted:"
# A marker of an earlier redaction (in the lowered text), cut short too: its kind is no name.
_MARKERS = re.compile(r"\[redacted:[a-z0-9_]{0,64}\]?")
RUN_LIMIT = 160  # longer runs of name characters are not key names
_UNKNOWN = (-1, -1, "")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")


def find_run(source: Source, occurrence: int) -> tuple[int, int, int]:
    """The run of name characters holding the secret word at ``occurrence``: its start and end,
    and where to look for the next run (start -1: longer than 160 characters, no key name).
    Memoised per text and occurrence: the detectors share the runs."""
    by_occurrence: dict[int, tuple[int, int, int]] = source.cache["runs_at"]  # type: ignore[assignment]
    known = by_occurrence.get(occurrence)
    if known is not None:
        return known  # (each detector asks for the same occurrences)
    runs: dict[int, tuple[int, int, int]] = source.cache["runs"]  # type: ignore[assignment]
    lowered = searchable(source)
    start = run_start(lowered, occurrence)
    known = runs.get(start) if start >= 0 else None  # (-1: a run too long, not one run)
    if known is not None and known[2] > occurrence:
        return known
    right = lowered[occurrence : occurrence + RUN_LIMIT + 1]
    stop = occurrence + len(right) - len(right.lstrip(_NAME_LOWER))
    if start < 0 or stop - start > RUN_LIMIT:
        end = _NAME_RUN.match(lowered, occurrence)  # skip all of a run too long to be a name
        resolved = (-1, -1, occurrence + 1 if end is None else end.end())
    else:
        resolved = by_occurrence[occurrence] = (start, stop, stop)
    if start >= 0:
        runs[start] = resolved
    return resolved


def run_start(lowered: str, position: int) -> int:
    """Where the run of name characters ending at ``position`` starts (-1: more than 160
    characters before it)."""
    low = max(0, position - RUN_LIMIT - 1)
    left = lowered[low:position]
    start = position - (len(left) - len(left.rstrip(_NAME_LOWER)))
    return -1 if start == low and low > 0 else start


def run_name(source: Source, start: int, stop: int) -> NameHit | None:
    """The name the run at [start, stop) is (None: no secret name). Memoised per text."""
    names: dict[int, NameHit | None] = source.cache["run_names"]  # type: ignore[assignment]
    if start in names:
        return names[start]
    # The same run recurs throughout a text (adversarial text: tens of thousands of times): a
    # name is judged by the run alone, so what the run says is memoised by its characters, as
    # offsets from its bounds. Not a bare "key" (judged by the word before it), nor a run right
    # after a letter blanked out of the searchable text (a service name starts a name part).
    if start and source.lowered[start - 1] in _LETTERS:
        name = names[start] = _run_name(source, start, stop)
        return name
    by_text: dict[str, tuple[int, int, str] | None] = source.cache.setdefault("run_texts", {})  # type: ignore[assignment]
    run = source.text[start:stop]
    known = by_text.get(run, _UNKNOWN)
    if known is _UNKNOWN:
        name = names[start] = _run_name(source, start, stop)
        if run.strip(".-").lower() != "key":
            by_text[run] = None if name is None else (name[0] - start, stop - name[1], name[2])
        return name
    if known is None:
        names[start] = None
        return None
    name = names[start] = (start + known[0], stop - known[1], known[2], False)  # type: ignore[assignment]
    return name


def _run_name(source: Source, start: int, stop: int) -> NameHit | None:
    text, lowered = source.text, source.lowered
    if text[start] in ".-":
        start = stop - len(text[start:stop].lstrip(".-"))
    if text[stop - 1] in ".-":
        stop = start + len(text[start:stop].rstrip(".-"))
    strength = name_strength(text[start:stop])
    if strength is not None:
        return (start, stop, strength, False)
    # A service's name starts a name part (``metabase_url``), never inside a word (``gambeer``).
    if _VENDOR.search(lowered, start, stop) is not None or (
        _services_occur(source) and find_service(lowered, start, stop)
    ):
        return (start, stop, "vendor", False)  # mailgun.client(…): a token may follow
    if stop - start == 3 and lowered.startswith("key", start):
        prose = prose_key(text, lowered, start)
        if prose is not None:
            return (start, stop, prose, True)
    return None


def _services_occur(source: Source) -> bool:
    """Whether the trigger pass found a service's name in the text (memoised per text)."""
    occur = source.cache.get("services")
    if occur is None:
        occur = source.cache["services"] = source.present is None or not _SERVICES.isdisjoint(
            source.present
        )
    return bool(occur)


def searchable(source: Source) -> str:
    """The lowered text with the spans the token and block detectors found (a word inside a
    private key or a vendor token is not a name: "PRIVATE KEY", "…key…" in a token) and the
    markers of an earlier redaction blanked out with NUL. Fixed when first asked, before the
    detectors that read names add their findings (those must not hide names)."""
    cached = source.cache.get("searchable")
    if cached is None:
        lowered = source.lowered
        spans = sorted((start, end) for start, end, _ in source.found)
        if _MARKER_LOWERED in lowered:
            spans = sorted((*spans, *(match.span() for match in _MARKERS.finditer(lowered))))
        if spans:
            parts: list[str] = []
            cursor = 0
            for span_start, end in spans:
                if end > cursor:
                    start = max(span_start, cursor)
                    parts += (lowered[cursor:start], "\0" * (end - start))
                    cursor = end
            parts.append(lowered[cursor:])
            lowered = "".join(parts)
        cached = source.cache["searchable"] = lowered
    return cached  # type: ignore[return-value]
