"""Schema migrations through `sqlite_utils.Migrations`, named `mNNN_description`.

Never edit a migration once it has landed: add a new one and bump `db.SCHEMA_VERSION`.
After applying, `PRAGMA user_version` is set to the number of migrations (the fence).
"""

from __future__ import annotations

import sqlite3

from sqlite_utils import Database, Migrations

from magic_context.errors import StorageUnavailable
from magic_context.records import record
from magic_context.results import Result
from magic_context.store import db as store_db

MIGRATION_SET = "magic_context"
migrations = Migrations(MIGRATION_SET)


def _run(db: Database, statements: str) -> None:
    # executescript would COMMIT and break the per-migration transaction: run one by one.
    for statement in statements.split(";\n"):
        if statement.strip():
            db.execute(statement)


@migrations()
def m001_initial(db: Database) -> None:
    """Sessions and their state, tags, pending ops, raw history, compartments, memories (+FTS), notes, reports."""
    _run(
        db,
        """
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    harness TEXT NOT NULL,
    session_id TEXT NOT NULL,
    project_id TEXT,
    project_dir TEXT,
    agent TEXT NOT NULL DEFAULT 'primary',
    model_key TEXT,
    context_limit INTEGER,
    tag_counter INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (harness, session_id)
);
CREATE TABLE IF NOT EXISTS session_state (
    session_pk INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value BLOB,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (session_pk, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tags (
    session_pk INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tag_number INTEGER NOT NULL,
    part_key TEXT NOT NULL,
    kind TEXT NOT NULL,
    message_id TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active',
    byte_size INTEGER NOT NULL DEFAULT 0,
    reasoning_byte_size INTEGER NOT NULL DEFAULT 0,
    tokens INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    tool_name TEXT,
    drop_mode TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_pk, tag_number),
    UNIQUE (session_pk, part_key)
);
CREATE TABLE IF NOT EXISTS source_contents (
    session_pk INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tag_number INTEGER NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (session_pk, tag_number)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending_ops (
    id INTEGER PRIMARY KEY,
    session_pk INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tag_number INTEGER NOT NULL,
    operation TEXT NOT NULL DEFAULT 'drop',
    forced INTEGER NOT NULL DEFAULT 0,
    queued_at INTEGER NOT NULL,
    UNIQUE (session_pk, tag_number, operation)
);
CREATE TABLE IF NOT EXISTS raw_messages (
    id INTEGER PRIMARY KEY,
    session_pk INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    body BLOB NOT NULL,
    tokens INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    superseded_at INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS raw_messages_live ON raw_messages (session_pk, ordinal) WHERE superseded_at IS NULL;
CREATE INDEX IF NOT EXISTS raw_messages_by_id ON raw_messages (session_pk, message_id);
CREATE TABLE IF NOT EXISTS raw_divergences (
    id INTEGER PRIMARY KEY,
    session_pk INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    at_ordinal INTEGER NOT NULL,
    reason TEXT NOT NULL,
    detected_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS compartments (
    id INTEGER PRIMARY KEY,
    session_pk INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    sequence INTEGER NOT NULL,
    start_ordinal INTEGER NOT NULL,
    end_ordinal INTEGER NOT NULL,
    start_message_id TEXT,
    end_message_id TEXT,
    title TEXT NOT NULL,
    p1 TEXT NOT NULL DEFAULT '',
    p2 TEXT NOT NULL DEFAULT '',
    p3 TEXT NOT NULL DEFAULT '',
    p4 TEXT NOT NULL DEFAULT '',
    content TEXT NOT NULL DEFAULT '',
    importance INTEGER NOT NULL DEFAULT 50,
    episode_type TEXT,
    legacy INTEGER NOT NULL DEFAULT 0,
    start_time INTEGER,
    end_time INTEGER,
    created_at INTEGER NOT NULL,
    UNIQUE (session_pk, sequence)
);
CREATE TABLE IF NOT EXISTS compartment_events (
    id INTEGER PRIMARY KEY,
    session_pk INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    compartment_id INTEGER REFERENCES compartments(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    fields_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY,
    project_id TEXT NOT NULL,
    category TEXT NOT NULL,
    content TEXT NOT NULL,
    normalized_hash TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'active',
    importance INTEGER NOT NULL DEFAULT 50,
    source_session TEXT,
    source_type TEXT NOT NULL DEFAULT 'agent',
    seen_count INTEGER NOT NULL DEFAULT 1,
    retrieval_count INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    last_seen_at INTEGER,
    expires_at INTEGER,
    superseded_by INTEGER REFERENCES memories(id),
    metadata_json TEXT,
    UNIQUE (project_id, category, normalized_hash)
);
CREATE TABLE IF NOT EXISTS notes (
    id INTEGER PRIMARY KEY,
    type TEXT NOT NULL DEFAULT 'session',
    status TEXT NOT NULL DEFAULT 'active',
    content TEXT NOT NULL,
    session_pk INTEGER REFERENCES sessions(id) ON DELETE CASCADE,
    project_id TEXT,
    surface_condition TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    ready_at INTEGER
);
CREATE TABLE IF NOT EXISTS pass_reports (
    id INTEGER PRIMARY KEY,
    session_pk INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    at INTEGER NOT NULL,
    pass_kind TEXT NOT NULL,
    bust INTEGER NOT NULL,
    reason TEXT NOT NULL,
    tokens_before INTEGER NOT NULL,
    tokens_after INTEGER NOT NULL,
    ms REAL NOT NULL,
    report_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS pass_reports_by_session ON pass_reports (session_pk, id);
CREATE TABLE IF NOT EXISTS token_counts (
    content_hash TEXT PRIMARY KEY,
    tokens INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID
""",
    )
    if not db["memories_fts"].exists():
        db.table("memories").enable_fts(["content", "category"], create_triggers=True, tokenize="porter")


@migrations()
def m002_response_usage(db: Database) -> None:
    """The provider usage of each session's latest response seen by `mc proxy`, and where its prompt ended."""
    _run(
        db,
        """
CREATE TABLE IF NOT EXISTS response_usage (
    session_pk INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    prompt_ordinal INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_input_tokens INTEGER NOT NULL DEFAULT 0,
    cache_creation_input_tokens INTEGER NOT NULL DEFAULT 0,
    recorded_at INTEGER NOT NULL
)
""",
    )


@migrations()
def m003_memories_notes(db: Database) -> None:
    """Memory merges and retrieval counters, the memory mutation log m[1] reads, note lifecycle columns, indexes."""
    _run(
        db,
        """
ALTER TABLE memories ADD COLUMN merged_from TEXT;
ALTER TABLE memories ADD COLUMN last_retrieved_at INTEGER;
CREATE INDEX IF NOT EXISTS memories_by_project ON memories (project_id, status, id);
CREATE INDEX IF NOT EXISTS memories_by_superseded ON memories (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE TABLE IF NOT EXISTS memory_mutations (
    id INTEGER PRIMARY KEY,
    project_id TEXT NOT NULL,
    memory_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    superseded_by INTEGER,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_mutations_by_project ON memory_mutations (project_id, id);
ALTER TABLE notes ADD COLUMN ready_reason TEXT;
ALTER TABLE notes ADD COLUMN last_checked_at INTEGER;
ALTER TABLE notes ADD COLUMN dismissed_at INTEGER;
ALTER TABLE notes ADD COLUMN anchor_ordinal INTEGER;
CREATE INDEX IF NOT EXISTS notes_by_session ON notes (session_pk, status, id);
CREATE INDEX IF NOT EXISTS notes_by_project ON notes (project_id, status, id)
""",
    )


def _run_script(db: Database, script: str) -> None:
    """Like `_run`, for scripts with triggers (their bodies hold `;`): split on complete statements."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            db.execute(buffer.strip().rstrip(";"))
            buffer = ""
    if buffer.strip():
        db.execute(buffer.strip())


@migrations()
def m004_search_index(db: Database) -> None:
    """Unified search (issue #12 §3): folded message text, compartments, git commits and vectors, FTS5 indexed.

    `message_text` holds one searchable text per live raw message (written by `search.indexer` after a
    publish, never on the transform's path); `compartments` and `git_commits` get external-content FTS
    tables kept in sync by triggers; `embeddings` stores float32 vectors keyed by (kind, ref, model_id);
    `search_state` keeps small JSON values (the last embedding failure, git refresh times).
    """
    _run_script(
        db,
        """
CREATE TABLE IF NOT EXISTS message_text (
    id INTEGER PRIMARY KEY,
    session_pk INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    role TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    at_ms INTEGER,
    text TEXT NOT NULL,
    UNIQUE (session_pk, ordinal)
);
CREATE VIRTUAL TABLE IF NOT EXISTS message_fts USING fts5(
    text, content='message_text', content_rowid='id', tokenize='porter unicode61');
CREATE TRIGGER IF NOT EXISTS message_text_ai AFTER INSERT ON message_text BEGIN
    INSERT INTO message_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS message_text_ad AFTER DELETE ON message_text BEGIN
    INSERT INTO message_fts(message_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER IF NOT EXISTS message_text_au AFTER UPDATE OF text ON message_text BEGIN
    INSERT INTO message_fts(message_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO message_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE VIRTUAL TABLE IF NOT EXISTS compartment_fts USING fts5(
    title, content, content='compartments', content_rowid='id', tokenize='porter unicode61');
CREATE TRIGGER IF NOT EXISTS compartments_fts_ai AFTER INSERT ON compartments BEGIN
    INSERT INTO compartment_fts(rowid, title, content) VALUES (new.id, new.title, new.content);
END;
CREATE TRIGGER IF NOT EXISTS compartments_fts_ad AFTER DELETE ON compartments BEGIN
    INSERT INTO compartment_fts(compartment_fts, rowid, title, content)
        VALUES ('delete', old.id, old.title, old.content);
END;
CREATE TRIGGER IF NOT EXISTS compartments_fts_au AFTER UPDATE OF title, content ON compartments BEGIN
    INSERT INTO compartment_fts(compartment_fts, rowid, title, content)
        VALUES ('delete', old.id, old.title, old.content);
    INSERT INTO compartment_fts(rowid, title, content) VALUES (new.id, new.title, new.content);
END;
INSERT INTO compartment_fts(compartment_fts) VALUES ('rebuild');
CREATE TABLE IF NOT EXISTS git_commits (
    id INTEGER PRIMARY KEY,
    project_id TEXT NOT NULL,
    sha TEXT NOT NULL,
    message TEXT NOT NULL,
    author TEXT,
    committed_at INTEGER NOT NULL,
    indexed_at INTEGER NOT NULL,
    UNIQUE (project_id, sha)
);
CREATE INDEX IF NOT EXISTS git_commits_by_time ON git_commits (project_id, committed_at);
CREATE VIRTUAL TABLE IF NOT EXISTS git_commit_fts USING fts5(
    message, content='git_commits', content_rowid='id', tokenize='porter unicode61');
CREATE TRIGGER IF NOT EXISTS git_commits_ai AFTER INSERT ON git_commits BEGIN
    INSERT INTO git_commit_fts(rowid, message) VALUES (new.id, new.message);
END;
CREATE TRIGGER IF NOT EXISTS git_commits_ad AFTER DELETE ON git_commits BEGIN
    INSERT INTO git_commit_fts(git_commit_fts, rowid, message) VALUES ('delete', old.id, old.message);
END;
CREATE TRIGGER IF NOT EXISTS git_commits_au AFTER UPDATE OF message ON git_commits BEGIN
    INSERT INTO git_commit_fts(git_commit_fts, rowid, message) VALUES ('delete', old.id, old.message);
    INSERT INTO git_commit_fts(rowid, message) VALUES (new.id, new.message);
END;
CREATE TABLE IF NOT EXISTS embeddings (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    ref TEXT NOT NULL,
    model_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    start_ordinal INTEGER,
    end_ordinal INTEGER,
    text_hash TEXT NOT NULL,
    dims INTEGER NOT NULL,
    vector BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (kind, ref, model_id)
);
CREATE INDEX IF NOT EXISTS embeddings_by_scope ON embeddings (kind, scope, model_id, end_ordinal);
CREATE TABLE IF NOT EXISTS search_state (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID
""",
    )


@migrations()
def m005_embeddings_per_scope(db: Database) -> None:
    """Vectors keyed by (kind, scope, ref, model_id): a message block's ref is its block number, which every
    session has, so under m004's (kind, ref, model_id) block N of one session replaced block N of every other
    one and semantic message search worked only for the session that embedded a block last. SQLite cannot change
    a table's UNIQUE constraint, so the table is rebuilt with the rows it holds (the blocks lost to the
    collision are embedded again by the backlog: a publish's catch-up, a search, `mc embed`).
    """
    _run_script(
        db,
        """
CREATE TABLE embeddings_m005 (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    ref TEXT NOT NULL,
    model_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    start_ordinal INTEGER,
    end_ordinal INTEGER,
    text_hash TEXT NOT NULL,
    dims INTEGER NOT NULL,
    vector BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (kind, scope, ref, model_id)
);
INSERT INTO embeddings_m005 SELECT id, kind, ref, model_id, scope, start_ordinal, end_ordinal, text_hash, dims,
    vector, created_at FROM embeddings;
DROP TABLE embeddings;
ALTER TABLE embeddings_m005 RENAME TO embeddings;
CREATE INDEX IF NOT EXISTS embeddings_by_scope ON embeddings (kind, scope, model_id, end_ordinal);
""",
    )


@record(frozen=True)
class MigrationStatus:
    """What `mc migrate` reports: names already applied and names still pending."""

    applied: list[str]
    pending: list[str]
    version_before: int
    version_after: int

    def to_result(self, database: str, *, dry_run: bool) -> Result:
        """`mc migrate`'s result (`applied` is empty on a dry run, `pending` after a real one)."""
        return Result("migrate", {
            "database": database,
            "dry_run": dry_run,
            "applied": [] if dry_run else self.pending,
            "pending": self.pending if dry_run else [],
            "already_applied": self.applied,
            "schema_version": self.version_after,
            "target_version": store_db.SCHEMA_VERSION,
        })


def all_names() -> list[str]:
    return [m.name for m in migrations._migrations]


def status(conn: sqlite3.Connection) -> MigrationStatus:
    """Read-only view of applied and pending migrations."""
    db = Database(conn)
    applied = [m.name for m in migrations.applied(db)]
    pending = [m.name for m in migrations.pending(db)]
    version = store_db.user_version(conn)
    return MigrationStatus(applied, pending, version, version)


def apply(conn: sqlite3.Connection) -> MigrationStatus:
    """Apply pending migrations, then set `PRAGMA user_version` to the migration count.

    One migrator at a time: the whole run holds `BEGIN IMMEDIATE` (the write lock), so processes that
    start together on a missing database wait within the busy timeout, then re-read `user_version`
    under the lock and find nothing left to do. A lock not obtained in time is StorageBusy (transient:
    a transform serves the input unchanged), never a "migration failed".
    """
    store_db.check_fence(conn)
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        raise store_db.classify(exc) from exc
    try:
        version_before = store_db.check_fence(conn)  # another process may have migrated while we waited
        before = status(conn)
        if before.pending or version_before < len(migrations._migrations):
            migrations.apply(Database(conn))  # each migration nests as a savepoint of this transaction
            conn.execute(f"PRAGMA user_version={len(migrations._migrations)}")
        conn.execute("COMMIT")
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.OperationalError) and store_db.is_busy(exc):
            raise store_db.classify(exc) from exc
        if isinstance(exc, sqlite3.Error):
            raise StorageUnavailable(
                f"migration failed: {exc}", fix="run `mc doctor`; restore a backup of context.db if it persists"
            ) from exc
        raise
    return MigrationStatus(before.applied, before.pending, version_before, store_db.user_version(conn))


__all__ = ["MIGRATION_SET", "MigrationStatus", "all_names", "apply", "migrations", "status"]
