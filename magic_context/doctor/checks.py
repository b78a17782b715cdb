"""The checks `mc doctor` runs, in order, each a small function returning a CheckResult."""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

from magic_context import paths
from magic_context.doctor.registry import Check, CheckResult, DoctorContext, Status
from magic_context.store import db as store_db

MIN_PYTHON = (3, 11)


def _python(ctx: DoctorContext) -> CheckResult:
    version = ctx.python_version or sys.version_info[:2]
    text = ".".join(map(str, version))
    if tuple(version) < MIN_PYTHON:
        return CheckResult(Status.FAIL, f"Python {text} is too old; mc needs ≥ {'.'.join(map(str, MIN_PYTHON))}")
    return CheckResult(Status.OK, f"Python {text}")


def _writable_dir(path: Path) -> CheckResult:
    if path.exists() and not path.is_dir():
        return CheckResult(Status.FAIL, f"{path} exists but is not a directory")
    if not path.exists():
        return CheckResult(Status.WARN, f"{path} does not exist yet (created on first use; --fix creates it)")
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        return CheckResult(Status.FAIL, f"{path} is not writable: {exc.strerror}")
    return CheckResult(Status.OK, str(path))


def _make_dir(path: Path) -> str:
    paths.ensure_private_dir(path)
    return f"created {path}"


def _config(ctx: DoctorContext) -> CheckResult:
    from magic_context.config.load import load_config

    loaded = load_config(ctx.project_dir)
    files = [str(f) for f in (loaded.user_file, loaded.project_file) if f is not None and f.exists()]
    ctx.notes["config"] = loaded
    if loaded.warnings:
        untrusted = sum(1 for w in loaded.warnings if "project config" in w.reason)
        detail = f"{len(loaded.warnings)} problem(s); affected keys use their defaults"
        if untrusted:
            detail = (f"{len(loaded.warnings)} problem(s): {untrusted} project key(s) stripped by the trust boundary "
                      "(your config or the default applies); other affected keys use their defaults")
        return CheckResult(Status.WARN, detail, tuple(str(w) for w in loaded.warnings))
    return CheckResult(Status.OK, "valid: " + (", ".join(files) if files else "no config files; using defaults"))


def _database(ctx: DoctorContext) -> CheckResult:
    path = paths.db_path()
    if not path.exists():
        return CheckResult(Status.WARN, f"{path} does not exist yet (--fix or `mc migrate` creates it)")
    try:
        conn = store_db.connect_read_only(path)
        try:
            store_db.table_count(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return CheckResult(Status.FAIL, f"{path} cannot be opened: {exc}")
    return CheckResult(Status.OK, str(path))


def _read_only(fn):
    """Run `fn(conn)` on a read-only connection, or return None when the database is absent/unopenable."""
    path = paths.db_path()
    if not path.exists():
        return None
    try:
        conn = store_db.connect_read_only(path)
    except sqlite3.Error:
        return None
    try:
        return fn(conn)
    except sqlite3.Error as exc:
        return exc
    finally:
        conn.close()


def _schema(ctx: DoctorContext) -> CheckResult:
    version = _read_only(store_db.user_version)
    if version is None:
        return CheckResult(Status.WARN, "no database yet")
    if isinstance(version, Exception):
        return CheckResult(Status.FAIL, f"cannot read the schema version: {version}")
    ctx.notes["schema_version"] = version
    if version > store_db.SCHEMA_VERSION:
        return CheckResult(Status.FAIL, f"schema version {version} is newer than this mc knows "
                                        f"({store_db.SCHEMA_VERSION}); upgrade mc")
    if version < store_db.SCHEMA_VERSION:
        return CheckResult(Status.WARN,
                           f"schema version {version} < {store_db.SCHEMA_VERSION}; run `mc migrate` (or --fix)")
    return CheckResult(Status.OK, f"schema version {version}")


def _migrate(ctx: DoctorContext) -> str:
    from magic_context.store import migrations

    conn = store_db.connect()
    try:
        result = migrations.apply(conn)
    finally:
        conn.close()
    return f"applied {len(result.pending)} migration(s)" if result.pending else "already current"


def _integrity(ctx: DoctorContext) -> CheckResult:
    rows = _read_only(store_db.integrity_check)
    if rows is None:
        return CheckResult(Status.WARN, "no database yet")
    if isinstance(rows, Exception):
        return CheckResult(Status.FAIL, f"integrity_check could not run: {rows}")
    if rows == ["ok"]:
        return CheckResult(Status.OK, "integrity_check: ok")
    return CheckResult(Status.FAIL, f"integrity_check found {len(rows)} problem(s); restore a backup or run "
                                    "`sqlite3 context.db .recover`", tuple(rows[:20]))


def _wal(ctx: DoctorContext) -> CheckResult:
    mode = _read_only(store_db.journal_mode)
    if mode is None:
        return CheckResult(Status.WARN, "no database yet")
    if isinstance(mode, Exception):
        return CheckResult(Status.FAIL, f"cannot read journal_mode: {mode}")
    if mode != "wal":
        return CheckResult(Status.WARN, f"journal_mode is {mode}, not wal (--fix switches it)")
    return CheckResult(Status.OK, "journal_mode: wal")


def _enable_wal(ctx: DoctorContext) -> str:
    conn = store_db.connect()
    conn.close()
    return "switched to WAL"


def _tokenizer(ctx: DoctorContext) -> CheckResult:
    from magic_context import tokens

    blocked: list[str] = []

    def refuse_network(event: str, args: tuple) -> None:
        if event in ("socket.connect", "socket.getaddrinfo") and ctx.notes.get("blocking_network"):
            blocked.append(event)
            raise OSError("network disabled by mc doctor")

    if not ctx.notes.get("audit_hook_installed"):
        sys.addaudithook(refuse_network)
        ctx.notes["audit_hook_installed"] = True
    ctx.notes["blocking_network"] = True
    try:
        count = tokens.count_exact("mc doctor checks the bundled tokenizer")
    finally:
        ctx.notes["blocking_network"] = False
    if count <= 0:
        return CheckResult(Status.FAIL, "bundled cl100k encoding returned no tokens")
    return CheckResult(Status.OK, "bundled cl100k encoding loads offline")


def _embeddings(ctx: DoctorContext) -> CheckResult:
    """The configured embedding provider embeds offline now (the network is blocked for `local`), and how much of
    the database lacks a vector for its model (a warning naming `mc embed --all` when something does)."""
    from magic_context.config.load import LoadedConfig, load_config
    from magic_context.search import health

    noted = ctx.notes.get("config")
    loaded = noted if isinstance(noted, LoadedConfig) else load_config(ctx.project_dir)
    local = loaded.config.embedding.provider == "local"
    if local and not ctx.notes.get("audit_hook_installed"):
        _tokenizer(ctx)  # installs the network-refusing audit hook
    ctx.notes["blocking_network"] = local
    try:
        state, detail = health.probe(loaded.config)
    finally:
        ctx.notes["blocking_network"] = False
    failure = health.last_failure_readonly(str(paths.db_path())) if paths.db_path().exists() else None
    items = (f"last failure ({failure.get('where')}): {failure.get('message')}",) if failure else ()
    backlog = _backlog(loaded.config)
    if backlog is not None:
        missing, model = backlog
        if missing:
            state, detail = Status.WARN, (f"{detail}; {missing} missing for {model}: run `mc embed --all` "
                                          "(semantic search covers only what has vectors)")
        else:
            detail = f"{detail}; nothing indexed lacks a vector for {model}"
    return CheckResult(state, detail, items)


def _backlog(config) -> tuple[str | None, str] | None:
    """(what lacks a vector for the configured model, as `mc status` words it, or None; the model) over the whole
    database, read-only (`backlog.missing_all`); None when there is nothing to count or no embedder to count for."""
    from importlib.util import find_spec

    from magic_context.errors import MCError
    from magic_context.search import backlog, embed

    if config.embedding.provider == "local" and find_spec("wordllama") is None:
        return None  # without the optional extra: FTS only, nothing is "missing"
    try:
        embedder = embed.from_config(config)
    except (MCError, ImportError, OSError, ValueError):
        return None  # misconfigured: the probe's detail says so
    if embedder is None:
        return None
    try:
        counts = _read_only(lambda conn: backlog.missing_all(conn, embedder.model_id))
    except MCError:  # a busy or older database: the other checks tell
        return None
    if not isinstance(counts, dict) or not any(v["total"] for v in counts.values()):
        return None
    return backlog.describe_missing(counts), embedder.model


def _logs(ctx: DoctorContext) -> CheckResult:
    return _writable_dir(paths.log_dir()) if paths.data_dir().exists() else CheckResult(
        Status.WARN, f"{paths.log_dir()} does not exist yet (created on first use)")


def default_checks() -> list[Check]:
    """Every check, in the order they run (fixes earlier in the list help the later ones)."""
    return [
        Check("python", "Python version", _python),
        Check("data_dir", "data directory writable", lambda c: _writable_dir(paths.data_dir()),
              lambda c: _make_dir(paths.data_dir()), "create the data directory"),
        Check("config_dir", "config directory writable", lambda c: _writable_dir(paths.config_dir()),
              lambda c: _make_dir(paths.config_dir()), "create the config directory"),
        Check("config", "config files parse and validate", _config),
        Check("database", "database opens", _database, _migrate, "create the database"),
        Check("schema", "schema is current", _schema, _migrate, "apply pending migrations"),
        Check("integrity", "PRAGMA integrity_check", _integrity),
        Check("wal", "WAL journal mode", _wal, _enable_wal, "switch to WAL"),
        Check("tokenizer", "bundled tokenizer loads without network", _tokenizer),
        Check("embeddings", "embedding provider works (search falls back to FTS if not)", _embeddings),
        Check("logs", "log directory writable", _logs,
              lambda c: _make_dir(paths.log_dir()), "create the log directory"),
    ]


def _integration(harness: str, scope) -> Check:
    def run(ctx: DoctorContext) -> CheckResult:
        from magic_context import integrations

        verdict = integrations.get(harness).verify(scope)
        return CheckResult(Status(verdict.status), verdict.detail, verdict.items)

    where = "project" if scope.kind == "project" else "global"
    return Check(f"{harness}_{where}", f"{harness} integration ({scope.describe()})", run)


def integration_checks(project_dir: Path | None) -> list[Check]:
    """One check per installed harness integration (project and global): plugin current, mc runs, version tested."""
    from magic_context import integrations

    return [_integration(harness, scope) for harness, scope in integrations.installed_scopes(project_dir)]


__all__ = ["MIN_PYTHON", "default_checks", "integration_checks"]
