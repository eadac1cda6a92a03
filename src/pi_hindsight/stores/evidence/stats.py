"""The evidence ledger's size and limits as ``evidence stats`` and ``status`` report them."""

from __future__ import annotations

from pydantic import Field, computed_field, field_serializer

from pi_hindsight.serialisation import Record
from pi_hindsight.stores.evidence.tables import LegacySource, format_bytes, iso


class EvidenceStats(Record):
    path: str
    # Counts read every metadata row; ``stats(counts=False)`` leaves them None (cheap status).
    records: int | None
    by_outcome: dict[str, int] | None
    delivered_attached: dict[str, int] | None  # true / false / unknown, of delivered records
    delivered_confirmed: dict[str, int] | None
    disk_bytes: int  # main file + WAL + shared memory
    used_bytes: int  # live pages (the rest of the file is free space SQLite reuses)
    cap_bytes: int
    budget_bytes: int  # what the ledger may use: the cap minus kept legacy originals
    legacy_bytes: int
    retention_days: float
    cap_evicted: int
    oldest_at: float | None
    newest_at: float | None
    legacy_sources: tuple[LegacySource, ...]
    cap_cutoff: float | None = Field(exclude=True)  # the newest record the cap evicted
    now: float = Field(exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def effective_retention_days(self) -> float:
        """The retention in force: the configured period, or less where the cap cut into it."""
        configured = self.retention_days
        if self.cap_cutoff is None:
            return configured
        return min(configured, max(0.0, (self.now - self.cap_cutoff) / 86_400))

    @computed_field  # type: ignore[prop-decorator]
    @property
    def retention_shortened(self) -> bool:
        return self.effective_retention_days < self.retention_days

    @computed_field  # type: ignore[prop-decorator]
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

    @computed_field  # type: ignore[prop-decorator]
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

    @field_serializer("effective_retention_days")
    def _rounded(self, days: float) -> float:
        return round(days, 3)

    @field_serializer("oldest_at", "newest_at")
    def _iso(self, timestamp: float | None) -> str | None:
        return iso(timestamp)
