"""The evidence ledger (``evidence.sqlite``): what memory each request prepared, attached and
confirmed (docs/evidence.md). ``ledger`` is the store, ``schema`` its tables and records, ``stats``
its size and limits, ``explain`` the host-neutral diagnosis of one request."""

from pi_hindsight.stores.evidence.held import HeldItem
from pi_hindsight.stores.evidence.ledger import (
    EVIDENCE_FILE_NAME,
    OUTCOMES,
    EvidenceLedger,
    EvidenceSpaceError,
)
from pi_hindsight.stores.evidence.tables import (
    DeliveredItem,
    MemoInfo,
    PreparedRecord,
    RequestRow,
)

__all__ = [
    "EVIDENCE_FILE_NAME",
    "OUTCOMES",
    "DeliveredItem",
    "EvidenceLedger",
    "EvidenceSpaceError",
    "HeldItem",
    "MemoInfo",
    "PreparedRecord",
    "RequestRow",
]
