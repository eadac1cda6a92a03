"""The evidence ledger's size and limits as ``evidence stats`` and ``status`` report them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pi_hindsight.stores.evidence.schema import LegacySource, format_bytes, iso


@dataclass(frozen=True)
class EvidenceStats:
    path: str
    # Counts read every metadata row; ``stats(counts=False)`` leaves them None (cheap status).
    records: int | None
    by_outcome: Mapping[str, int] | None
    delivered_attached: Mapping[str, int] | None  # true / false / unknown, of delivered records
    delivered_confirmed: Mapping[str, int] | None
    disk_bytes: int  # main file + WAL + shared memory
    used_bytes: int  # live pages (the rest of the file is free space SQLite reuses)
    cap_bytes: int
    budget_bytes: int  # what the ledger may use: the cap minus kept legacy originals
    legacy_bytes: int
    legacy_sources: tuple[LegacySource, ...]
    retention_days: float
    oldest_at: float | None
    newest_at: float | None
    cap_cutoff: float | None  # the newest record the cap evicted
    cap_evicted: int
    now: float

    @property
    def effective_retention_days(self) -> float:
        """The retention in force: the configured period, or less where the cap cut into it."""
        configured = self.retention_days
        if self.cap_cutoff is None:
            return configured
        return min(configured, max(0.0, (self.now - self.cap_cutoff) / 86_400))

    @property
    def retention_shortened(self) -> bool:
        return self.effective_retention_days < self.retention_days

    @property
    def retention_note(self) -> str:
        cap = format_bytes(self.cap_bytes)
        if self.retention_shortened:
            days = self.effective_retention_days
            span = f"{days:.1f} days" if days >= 1 else f"{days * 24:.1f} hours"
            return (
                f"retention shortened to {span} by the {cap} cap "
                f"({self.retention_days:g} days configured; {self.cap_evicted} records evicted)"
            )
        return f"retention {self.retention_days:g} days, cap {cap}"

    @property
    def problems(self) -> tuple[str, ...]:
        found: list[str] = []
        if self.legacy_bytes and self.cap_bytes - self.legacy_bytes < self.budget_bytes:
            found.append(
                f"kept legacy originals ({format_bytes(self.legacy_bytes)}) leave less than 10% "
                f"of the {format_bytes(self.cap_bytes)} cap for evidence; delete the originals "
                "you have checked, or raise evidence.capBytes"
            )
        return tuple(found)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "records": self.records,
            "byOutcome": None if self.by_outcome is None else dict(self.by_outcome),
            "deliveredAttached": None
            if self.delivered_attached is None
            else dict(self.delivered_attached),
            "deliveredConfirmed": None
            if self.delivered_confirmed is None
            else dict(self.delivered_confirmed),
            "diskBytes": self.disk_bytes,
            "usedBytes": self.used_bytes,
            "capBytes": self.cap_bytes,
            "budgetBytes": self.budget_bytes,
            "legacyBytes": self.legacy_bytes,
            "retentionDays": self.retention_days,
            "effectiveRetentionDays": round(self.effective_retention_days, 3),
            "retentionShortened": self.retention_shortened,
            "retentionNote": self.retention_note,
            "capEvicted": self.cap_evicted,
            "oldestAt": iso(self.oldest_at),
            "newestAt": iso(self.newest_at),
            "problems": list(self.problems),
            "legacySources": [source_json(source) for source in self.legacy_sources],
        }


def source_json(source: LegacySource) -> dict[str, Any]:
    return {
        "identity": source.identity,
        "path": source.path,
        "size": source.size,
        "nextOffset": source.next_offset,
        "nextLine": source.next_line,
        "formats": dict(source.formats),
        "imported": source.imported,
        "duplicates": source.duplicates,
        "skipped": dict(source.skipped),
        "bad": source.bad,
        "badLines": [{"line": line, "reason": why} for line, why in source.bad_lines],
        "completedAt": iso(source.completed_at),
    }
