"""The Hindsight boundary: the :class:`MemoryBackend` protocol and our own records.

Cheap to import: neither this package's ``__init__`` nor ``protocol``/``records`` imports the
official client (~0.8 s; the sidecar answers ``ready`` before it). :func:`open_backend` imports it
on first use.

Layout: ``protocol`` (what callers may ask), ``records`` (one frozen record per resource),
``_client`` (the one ``ApiClient`` holder and the one translation of foreign failures),
the resource modules (``memories``, ``banks``, ``mental_models``, ``operations``, ``documents``,
``templates``), and ``hindsight`` (``HindsightBackend``, composing them).
"""

from __future__ import annotations

from collections.abc import Callable

from pi_hindsight.backend.interface import MemoryBackend
from pi_hindsight.backend.resources import (
    MISSION_KEYS,
    BankConfig,
    BankMissions,
    DirectiveInfo,
    DocumentInfo,
    ListedState,
    MemoryRecord,
    MentalModel,
    MissionKey,
    OperationState,
    OperationStatus,
    ReflectResult,
    RetainAccepted,
    RetainItem,
    TagsMatch,
    TemplateImportResult,
)

__all__ = [
    "MISSION_KEYS",
    "BankConfig",
    "BankMissions",
    "DirectiveInfo",
    "DocumentInfo",
    "ListedState",
    "MemoryBackend",
    "MemoryRecord",
    "MentalModel",
    "MissionKey",
    "OperationState",
    "OperationStatus",
    "ReflectResult",
    "RetainAccepted",
    "RetainItem",
    "TagsMatch",
    "TemplateImportResult",
    "open_backend",
]


def open_backend(
    base_url: str,
    *,
    api_key: str | Callable[[], str | None] | None = None,
    ca_file: str | None = None,
) -> MemoryBackend:
    """The backend for the Hindsight server at ``base_url`` (imports the official client).
    ``api_key``: the key, or a callable asked before every call (a key that may be rotated);
    ``ca_file``: the CA certificates an ``https://`` server's certificate must chain to."""
    from pi_hindsight.backend.hindsight import HindsightBackend  # noqa: PLC0415 - ~0.8 s import

    return HindsightBackend(base_url, api_key=api_key, ca_file=ca_file)
