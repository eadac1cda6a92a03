"""Tokens whose format carries a checksum: a valid checksum makes a token certain.

GitHub's tokens (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``) and npm's (``npm_``) end in
6 base62 characters that encode the CRC32 of the 30 random characters before them (GitHub's
"Behind GitHub's new authentication token formats", 2021; npm adopted the same scheme). A body
with a valid checksum is a real token even when it looks regular; one without it is redacted
unless its body is flat (``a1B2a1B2…``: under 2.5 bits of entropy per character) or a
placeholder: a test fixture or a hand-made string is harmless to redact, a stand-in is not.
"""

from __future__ import annotations

import zlib

__all__ = ["crc32_base62_valid"]

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _base62(number: int, width: int) -> str:
    digits = []
    while number:
        number, digit = divmod(number, 62)
        digits.append(_BASE62[digit])
    return "".join(reversed(digits)).rjust(width, "0")


def crc32_base62_valid(body: str) -> bool:
    """``body``: 36 base62 characters, 30 random then the CRC32 of those 30 in 6 base62 digits."""
    if len(body) != 36 or not body.isascii() or not body.isalnum():
        return False
    return _base62(zlib.crc32(body[:30].encode()), 6) == body[30:]
