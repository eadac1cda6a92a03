"""The selected bank's missions (R-CONF-6, R-CONF-8): read them; change them, dry run first.

Hindsight 1.1.0 has three, all bank config: ``reflect_mission`` (what the bank is for; the old
``mission`` field is its alias, and the one pi-hindsight sets when it creates a bank),
``retain_mission`` (what extraction keeps) and ``observations_mission`` (what consolidation
synthesises). They are bank-wide: in a bank shared by several projects they apply to all.
"""

from __future__ import annotations

from dataclasses import dataclass

from pi_hindsight.backend.interface import MemoryBackend
from pi_hindsight.backend.resources import MissionKey
from pi_hindsight.errors import ConfigError
from pi_hindsight.maintenance.common import FieldChange, require_bank

# Our names -> Hindsight's config keys.
MISSION_FIELDS: dict[str, MissionKey] = {
    "mission": "reflect_mission",
    "retain_mission": "retain_mission",
    "observations_mission": "observations_mission",
}
MAX_MISSION_CHARS = 4_000


@dataclass(frozen=True)
class Missions:
    bank: str
    mission: str | None
    retain_mission: str | None
    observations_mission: str | None
    set_on_bank: tuple[str, ...]  # the fields set on this bank (the others are server defaults)


@dataclass(frozen=True)
class MissionChange:
    bank: str
    applied: bool
    changes: tuple[FieldChange, ...]  # only fields whose value differs
    missions: Missions  # after the change when applied; the current ones in a dry run


async def read_missions(backend: MemoryBackend, bank: str, *, timeout: float) -> Missions:
    await require_bank(backend, bank, timeout=timeout)
    return await _read(backend, bank, timeout)


async def _read(backend: MemoryBackend, bank: str, timeout: float) -> Missions:
    config = await backend.bank_config(bank, timeout=timeout)

    def value(key: str) -> str | None:
        found = config.config.get(key)
        return None if found is None else str(found)

    return Missions(
        bank=bank,
        mission=value("reflect_mission"),
        retain_mission=value("retain_mission"),
        observations_mission=value("observations_mission"),
        set_on_bank=tuple(name for name, key in MISSION_FIELDS.items() if key in config.overrides),
    )


async def update_missions(
    backend: MemoryBackend,
    bank: str,
    *,
    mission: str | None = None,
    retain_mission: str | None = None,
    observations_mission: str | None = None,
    apply: bool,
    timeout: float,
) -> MissionChange:
    """Set the given missions (None leaves a field alone). ``apply=False``: only report."""
    wanted = {
        name: text
        for name, text in (
            ("mission", mission),
            ("retain_mission", retain_mission),
            ("observations_mission", observations_mission),
        )
        if text is not None
    }
    if not wanted:
        raise ConfigError("no mission given", hint="give the mission, retain or observations text")
    for name, text in wanted.items():
        if not text.strip() or len(text) > MAX_MISSION_CHARS:
            raise ConfigError(
                f"{name}: must be non-empty text of at most {MAX_MISSION_CHARS} characters"
            )
    await require_bank(backend, bank, timeout=timeout)
    current = await _read(backend, bank, timeout)
    changes = tuple(
        FieldChange(field=name, before=getattr(current, name), after=text)
        for name, text in wanted.items()
        if getattr(current, name) != text
    )
    if not apply or not changes:
        return MissionChange(bank=bank, applied=False, changes=changes, missions=current)
    await backend.update_missions(
        bank, {MISSION_FIELDS[change.field]: change.after for change in changes}, timeout=timeout
    )
    return MissionChange(
        bank=bank, applied=True, changes=changes, missions=await _read(backend, bank, timeout)
    )
