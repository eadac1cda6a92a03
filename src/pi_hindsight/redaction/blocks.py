"""Secrets that span lines: PEM/PGP private key blocks (also base64-encoded, as in a Kubernetes
``tls.key``), PuTTY key files, and the ``data:``/``stringData:`` of a Kubernetes ``Secret``; and
Jenkins's encrypted secrets (``<secret>{AQAAABAAAA…}</secret>`` in a credentials XML file).

A private key block runs from its ``BEGIN`` line to the matching ``END`` line. Each ``BEGIN`` is
paired with the first ``END`` of the same label after it, found by bisection in the list of all
``END`` lines (one scan), unless another ``BEGIN`` of that label comes first: then it is a
truncated paste, and only the base64 lines that follow it are taken. So the text is scanned once
whatever the number of headers (a lazy ``BEGIN.*?END`` rescans the rest of the text from every
header: quadratic on ``"-----BEGIN PRIVATE KEY-----\\n" * 7143``).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import re
from collections.abc import Iterator

from pi_hindsight.redaction.source import Hit, Source
from pi_hindsight.redaction.values import is_not_a_secret, looks_random

__all__ = ["find_jenkins_secrets", "find_kubernetes_secrets", "find_private_keys"]

_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]{1,16} ){0,4})PRIVATE KEY( BLOCK)?-----")
_END = re.compile(r"-----END ((?:[A-Z0-9]{1,16} ){0,4})PRIVATE KEY( BLOCK)?-----")
# Line breaks, raw or escaped inside a JSON string (a service-account key file).
_BREAK = r"(?:\r?\n|\\r?\\n)"
# After a BEGIN without its END: header lines (Proc-Type:, DEK-Info:, Version:), one blank line,
# then the base64 lines.
_BODY = re.compile(
    rf"(?:{_BREAK}[ \t]{{0,64}}+[A-Za-z][A-Za-z-]{{0,30}}: [^\r\n\\]{{0,256}}+)*+"
    rf"(?:{_BREAK}(?={_BREAK}))?"
    rf"(?:{_BREAK}[ \t]{{0,64}}+[A-Za-z0-9+/=]{{4,}}+(?=\r?\n|\\[rn]|[\"' \t]|\Z))*+"
)
_PUTTY = re.compile(
    r"PuTTY-User-Key-File-[0-9]{1,2}: [^\r\n]{0,256}+"
    r"(?:\r?\n(?:[A-Za-z][A-Za-z-]{0,30}: [^\r\n]{0,1024}+|[A-Za-z0-9+/=]{4,}+(?=\r?\n|\Z)))*+"
)
# A PEM block, base64-encoded once more: "LS0tLS1CRUdJTi" is base64 for "-----BEGIN".
_PEM_BASE64 = re.compile(
    r"LS0tLS1CRUdJTi(?<![A-Za-z0-9+/=]LS0tLS1CRUdJTi)[A-Za-z0-9+/]{20,}+={0,2}"
)


# A real key's body has base64 lines of 64 (PEM) or 70 (OpenSSH) characters; armour whose body
# holds no run of 16 is a placeholder in documentation.
_KEY_RUN = re.compile(r"[A-Za-z0-9+/=]{16}")


# Jenkins stores a credential's secret encrypted with its instance key as ``{<base64>}``, the
# base64 of a version byte and a 4-byte length of 16 (the IV): "AQAAABAAAA" (hudson.util.Secret).
# With the instance's master.key it decrypts, so the braces' content is a secret; a value pasted
# after the marker with a blank (``{AQAAABAAA <key>}``) is taken with it.
_JENKINS = re.compile(r"\{(AQAAABAAA[A-Za-z0-9+/=]{0,4096}+(?: [A-Za-z0-9+/=._-]{8,4096}+)?)\}")


# Beside such a secret, braces mark a secret value in another element of the same file too
# (``<id>{aha 3af0…}</id>``: a service's name, then its key): the random token in them, unless a
# word before it says it names an id or a user (``{anypoint id …}``, ``{BS_USERNAME …}``).
_JENKINS_BRACED = re.compile(
    r"<([A-Za-z]{1,32})>\{((?:[A-Za-z][A-Za-z0-9_]{0,31}[ \t]){0,2})"
    r"([A-Za-z0-9+/=_-]{16,256})\}</\1>"
)
_NOT_A_KEY = ("id", "user", "name", "login", "email")


def find_jenkins_secrets(source: Source) -> Iterator[Hit]:
    for match in _JENKINS.finditer(source.text):
        encrypted, _, pasted = match.group(1).partition(" ")
        if len(encrypted) >= 25 or (pasted and looks_random(pasted, 16)):  # (the marker alone,
            yield (*match.span(1), "jenkins_secret")  # or a word after it, is none)
    for match in _JENKINS_BRACED.finditer(source.text):
        words, value = match.group(2).lower().replace("_", " ").split(), match.group(3)
        if (
            not value.startswith("AQAAABAAA")
            and not any(word.endswith(_NOT_A_KEY) for word in words)
            and looks_random(value, 16)
            and not is_not_a_secret(value)
        ):
            yield (*match.span(3), "jenkins_secret")


def find_private_keys(source: Source) -> Iterator[Hit]:
    text = source.text
    if "-----BEGIN" in text:
        yield from _pem_blocks(text)
    if "PuTTY-User-Key-File-" in text:
        for match in _PUTTY.finditer(text):
            yield (match.start(), match.end(), "private_key")
    if "LS0tLS1CRUdJTi" in text:
        for match in _PEM_BASE64.finditer(text):
            if _decodes_to_private_key(match.group()):
                yield (match.start(), match.end(), "private_key")


def _pem_blocks(text: str) -> Iterator[Hit]:
    ends: dict[tuple[str, ...], list[int]] = {}
    end_of: dict[int, int] = {}
    for match in _END.finditer(text):
        ends.setdefault(match.groups(""), []).append(match.start())
        end_of[match.start()] = match.end()
    begins = list(_BEGIN.finditer(text))
    next_begin: list[int] = [len(text) + 1] * len(begins)
    last_seen: dict[tuple[str, ...], int] = {}
    for index in range(len(begins) - 1, -1, -1):
        label = begins[index].groups("")
        next_begin[index] = last_seen.get(label, len(text) + 1)
        last_seen[label] = begins[index].start()
    covered = 0
    for index, begin in enumerate(begins):
        if begin.start() < covered:
            continue
        candidates = ends.get(begin.groups(""), [])
        at = bisect.bisect_left(candidates, begin.end())
        if at < len(candidates) and candidates[at] < next_begin[index]:
            finish = end_of[candidates[at]]
            if _KEY_RUN.search(text, begin.end(), candidates[at]) is None:
                covered = finish  # armour around a placeholder ("...", "<key>"): no key
                continue
        else:
            body = _BODY.match(text, begin.end())
            finish = begin.end() if body is None else body.end()
        covered = finish
        yield (begin.start(), finish, "private_key")


def _decodes_to_private_key(encoded: str) -> bool:
    head = encoded[:96]
    head = head[: len(head) - len(head) % 4]
    try:
        decoded = base64.b64decode(head, validate=False)
    except (binascii.Error, ValueError):
        return False
    return b"PRIVATE KEY" in decoded


_KIND_SECRET = re.compile(r"kind[\"']?[ \t]{0,16}:[ \t]{0,16}[\"']?Secret[\"']?(?![A-Za-z0-9_])")
_DATA = re.compile(r"(?m)^([ \t]*)(?:data|stringData):[ \t]*\r?$")
_DOCUMENT = re.compile(r"(?m)^---")
_ENTRY = re.compile(r"[ \t]*[^\s:#][^:]{0,252}:[ \t]*")


def find_kubernetes_secrets(source: Source) -> Iterator[Hit]:
    """Every value under ``data:`` / ``stringData:`` in a YAML document of ``kind: Secret``."""
    text = source.text
    kinds = [match.start() for match in _KIND_SECRET.finditer(text)]
    if not kinds:
        return
    documents = [match.start() for match in _DOCUMENT.finditer(text)]
    covered = 0
    found: list[Hit] = []
    for data in _DATA.finditer(text):
        if data.start() < covered:
            continue
        if documents:
            at = bisect.bisect_right(documents, data.start())
            first = documents[at - 1] if at else 0
            last = documents[at] if at < len(documents) else len(text) + 1
        else:
            first, last = 0, len(text) + 1
        kind_at = bisect.bisect_left(kinds, first)
        if kind_at >= len(kinds) or kinds[kind_at] >= last:
            continue
        covered = _data_block(text, data.end(), len(data.group(1)), found)
    yield from found


@functools.cache
def _block(data_indent: int) -> re.Pattern[str]:
    """The lines of a data block indented ``data_indent``: blank or comment lines, and lines
    indented more (one match: the block's end)."""
    return re.compile(
        rf"(?:\n(?:[ \t]*+(?:#[^\n]*+)?\r?(?=\n|\Z)|[ \t]{{{data_indent + 1}}}[^\n]*+))*+"
    )


def _data_block(text: str, position: int, data_indent: int, found: list[Hit]) -> int:
    """Adds the findings for the entries of a data block starting at ``position`` (its ``data:``
    line's end) to ``found``; returns where the block ends."""
    block = _block(data_indent).match(text, position)
    end = position if block is None else block.end()  # (the pattern matches the empty string)
    entry_indent: int | None = None
    while position < end:
        line_start = position + 1
        line_end = text.find("\n", line_start, end)
        line_end = end if line_end < 0 else line_end
        line = text[line_start:line_end].rstrip("\r")
        content = line.lstrip(" \t")
        indent = len(line) - len(content)
        if content and not content.startswith("#"):
            if entry_indent is None:
                entry_indent = indent
            if indent > entry_indent:  # a line of a multi-line (|, >) value
                found.append((line_start + indent, line_start + len(line), "kubernetes_secret"))
            else:
                entry = _ENTRY.match(line)
                if entry is not None:
                    value = line[entry.end() :].rstrip(" \t")
                    unquoted = value.strip("\"'")
                    if unquoted and not is_not_a_secret(unquoted):
                        offset = value.find(unquoted)
                        start = line_start + entry.end() + offset
                        found.append((start, start + len(unquoted), "kubernetes_secret"))
        position = line_end
    return end + 1 if end < len(text) else len(text)
