"""The outbox file's schema: ordered, named migrations, applied when the store opens.

Version 1 kept one row per request with its own lease and retry state. Version 2 moves delivery
state to *batches* (consecutive requests of one session sent as one retain call) and adds the
request id that makes enqueueing idempotent. See ``stores/outbox.py`` for the state machine.
"""

from __future__ import annotations

from pi_hindsight.stores.sqlite import Migration, StoreSchema

SCHEMA = StoreSchema(
    name="outbox",
    application_id=0x50484F31,  # "PHO1"
    migrations=(
        Migration(
            "create items",
            """
            CREATE TABLE items (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                item_id TEXT NOT NULL UNIQUE,
                session_id TEXT NOT NULL,
                bank_id TEXT NOT NULL,
                payload TEXT NOT NULL,
                payload_bytes INTEGER NOT NULL,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                generation INTEGER NOT NULL DEFAULT 0,
                next_attempt_at REAL NOT NULL,
                lease_owner TEXT,
                lease_expires_at REAL,
                server_operation_id TEXT,
                last_error TEXT,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            );
            CREATE INDEX items_by_state ON items(state, next_attempt_at);
            CREATE INDEX items_by_session ON items(session_id, seq)
            """,
        ),
        Migration(
            "batches and request ids",
            # Items that were in flight under schema 1 become one-item batches whose id is the
            # item id: their idempotency key (the item id) is unchanged.
            """
            CREATE TABLE batches (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                batch_id TEXT NOT NULL UNIQUE,
                session_id TEXT NOT NULL,
                bank_id TEXT NOT NULL,
                state TEXT NOT NULL,
                generation INTEGER NOT NULL DEFAULT 0,
                attempts INTEGER NOT NULL DEFAULT 0,
                failures INTEGER NOT NULL DEFAULT 0,
                next_attempt_at REAL NOT NULL,
                lease_owner TEXT,
                lease_expires_at REAL,
                server_operation_id TEXT,
                last_error TEXT,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            );
            CREATE INDEX batches_by_state ON batches(state, next_attempt_at);
            CREATE INDEX batches_by_session ON batches(session_id, state);
            ALTER TABLE items ADD COLUMN batch_id TEXT;
            ALTER TABLE items ADD COLUMN request_id TEXT;
            INSERT INTO batches (batch_id, session_id, bank_id, state, generation, attempts,
                next_attempt_at, server_operation_id, last_error, created_at, updated_at)
                SELECT item_id, session_id, bank_id,
                    CASE state WHEN 'leased' THEN 'sending' ELSE state END,
                    generation, attempts, next_attempt_at, server_operation_id, last_error,
                    created_at, updated_at
                FROM items WHERE state IN ('leased', 'submitted');
            UPDATE items SET batch_id = item_id,
                state = CASE state WHEN 'leased' THEN 'sending' ELSE state END
                WHERE state IN ('leased', 'submitted');
            DROP INDEX items_by_state;
            ALTER TABLE items DROP COLUMN attempts;
            ALTER TABLE items DROP COLUMN generation;
            ALTER TABLE items DROP COLUMN next_attempt_at;
            ALTER TABLE items DROP COLUMN lease_owner;
            ALTER TABLE items DROP COLUMN lease_expires_at;
            ALTER TABLE items DROP COLUMN server_operation_id;
            CREATE INDEX items_by_state ON items(state, seq);
            CREATE INDEX items_by_batch ON items(batch_id);
            CREATE UNIQUE INDEX items_by_request ON items(session_id, request_id)
                WHERE request_id IS NOT NULL
            """,
        ),
        Migration(
            "skipped requests",
            # Requests not sent because they carry no knowledge (engine/trivial.py): which, why.
            """
            CREATE TABLE skipped (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                session_id TEXT NOT NULL,
                request_id TEXT NOT NULL,
                bank_id TEXT NOT NULL,
                reason TEXT NOT NULL,
                chars INTEGER NOT NULL,
                created_at REAL NOT NULL,
                UNIQUE (session_id, request_id)
            );
            CREATE INDEX skipped_by_time ON skipped(created_at)
            """,
        ),
    ),
)
