"""Everything that reads what older versions and other integrations left behind: legacy evidence
JSONL (``evidence_formats``, ``evidence_import``) and legacy or foreign config keys
(``config_keys``). Nothing else in the package knows those shapes."""
