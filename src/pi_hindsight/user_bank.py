"""Whose User bank: one person's, also on a server a team shares.

The User bank holds one person's durable preferences (written only on purpose, with
``hindsight_retain_global``). On a server nobody else uses — loopback, no API key — its id is
``banks.user.bankId`` (default ``pi-user``), as it always was. On a **shared** server — an API
key is configured, or the server's URL is not loopback — that default would put every member's
preferences in one bank and recall them in each other's sessions, so the default id is derived
per person instead::

    pi-user-<12 hex digits of sha256("pi-hindsight user bank\\0" + who)>

``who`` is ``bankNaming.userId`` when set (to carry one User bank across machines), else the OS
account and the machine's host name (``alice@build-7``). The derivation depends on nothing a
session or a host adapter changes: Pi and Claude Code, every session and every restart of that
person on that machine get the same id.

An explicit ``banks.user.bankId`` (user config or ``PI_HINDSIGHT_USER_BANK_ID``) is kept as
set. On a shared server that is reported: a warning when it is ``pi-user`` (everyone's old
default: certainly shared), a note otherwise (it is personal only if no one else sets it).

The project bank is not touched: on a team's server it is the team's memory, shared by design.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import socket
from collections.abc import Mapping
from typing import Literal

from pydantic import computed_field

from pi_hindsight.serialisation import Record
from pi_hindsight.transport import is_loopback_url

DEFAULT_BANK_ID = "pi-user"
PREFIX = "pi-user-"
USER_BANK_KEY = "banks.user.bankId"

Kind = Literal["local", "personal", "explicit"]


def os_account() -> str:
    """``<account>@<host name>``: the OS account (by uid, not ``$USER``) on this machine."""
    try:
        account = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        account = f"uid{os.getuid()}"
    return f"{account}@{socket.gethostname()}"


def personal_bank_id(who: str) -> str:
    digest = hashlib.sha256(f"pi-hindsight user bank\0{who}".encode("utf-8", "replace"))
    return PREFIX + digest.hexdigest()[:12]


def shared_reason(base_url: str | None, api_key: str | None) -> str | None:
    """Why the server counts as shared (None: it does not)."""
    if api_key:
        return "an API key is configured"
    if base_url and not is_loopback_url(base_url):
        return "the server is not on this machine (not a loopback URL)"
    return None


class UserBankChoice(Record):
    """The User bank id in effect, and why."""

    bank_id: str
    kind: Kind
    basis: str  # what it was derived from, or where it was set
    shared_reason: str | None  # why the server counts as shared (None: not shared)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def shared_server(self) -> bool:
        return self.shared_reason is not None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def shared_with_others(self) -> bool:
        """An explicit id on a shared server: anyone who sets the same id shares the bank."""
        return self.kind == "explicit" and self.shared_reason is not None

    def describe(self) -> str:
        if self.kind == "personal":
            return f"{self.bank_id} (personal: derived from {self.basis})"
        if self.kind == "explicit" and self.shared_reason is not None:
            return (
                f"{self.bank_id} (set in {self.basis}; on this shared server anyone who sets "
                "the same id reads and writes it)"
            )
        if self.kind == "explicit":
            return f"{self.bank_id} (set in {self.basis})"
        return f"{self.bank_id} (this server is not shared)"


def choose(
    configured_id: str,
    sources: Mapping[str, str],
    *,
    base_url: str | None,
    api_key: str | None,
    user_id: str | None,
) -> UserBankChoice:
    """The User bank id for these settings (module docstring)."""
    reason = shared_reason(base_url, api_key)
    source = sources.get(USER_BANK_KEY)
    if source is not None:
        return UserBankChoice(
            bank_id=configured_id, kind="explicit", basis=source, shared_reason=reason
        )
    if reason is None:
        return UserBankChoice(
            bank_id=configured_id, kind="local", basis="the default", shared_reason=None
        )
    if user_id:
        return UserBankChoice(
            bank_id=personal_bank_id(user_id),
            kind="personal",
            basis="bankNaming.userId",
            shared_reason=reason,
        )
    who = os_account()
    return UserBankChoice(
        bank_id=personal_bank_id(who),
        kind="personal",
        basis=f"the OS account {who}",
        shared_reason=reason,
    )


def problem_text(choice: UserBankChoice, active: bool) -> tuple[str, str, bool] | None:
    """(message, fix, is_warning) to report about an explicit id on a shared server."""
    if not choice.shared_with_others:
        return None
    generic = choice.bank_id == DEFAULT_BANK_ID
    message = (
        f"the User bank id {choice.bank_id!r} is set explicitly and the server is shared "
        f"({choice.shared_reason}): everyone who sets the same id shares that User bank and "
        "is recalled the others' preferences"
    )
    if generic:
        message += f" — {DEFAULT_BANK_ID!r} is everyone's old default"
    fix = (
        "remove banks.user.bankId (and PI_HINDSIGHT_USER_BANK_ID) to use your personal id, or "
        "set an id no one else uses (docs/server.md, 'Personal memory on a shared server')"
    )
    return message, fix, generic and active
