"""`mc embed`: embed the backlog — what has no vector for the configured embedding model yet."""

from __future__ import annotations

from pathlib import Path

import typer

from commands import _output
from magic_context.results import Result


def embed(
    session: str = typer.Option(None, "--session", help="Embed this session (and its project's memories)."),
    harness: str = typer.Option(None, "--harness", help="Disambiguate a session id used by several harnesses."),
    project: Path = typer.Option(None, "--project", help="Embed every session and memory of this project directory."),
    all_sessions: bool = typer.Option(False, "--all", help="Embed every session and memory in the database."),
    max_blocks: int = typer.Option(None, "--max-blocks", min=1, metavar="N",
                                   help="Most message blocks (256 messages each) to embed this run; run again to "
                                        "continue."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON envelope with the counts on stdout."),
) -> None:
    """Embed compartments, memories and message blocks that have no vector for the configured model.

    \b
    Vectors are keyed by the embedding model: after changing embedding.provider or embedding.model, after the
    provider was down while the historian published, or on a database from an older mc, semantic search covers
    only what has vectors (FTS still finds everything). The background historian catches up a few blocks after
    each publish; this embeds the rest now. Runs are resumable: a second run embeds nothing new.
    Default scope: the current directory's project.
    Examples:
      mc embed --all
      mc embed --session ses_abc123 --json
      mc embed --project ~/src/app --max-blocks 50
    """
    import os

    from magic_context.config.load import load_config
    from magic_context.errors import BadInput, CheckFailed
    from magic_context.search import backlog, scope
    from magic_context.search import embed as providers
    from magic_context.store import db

    if all_sessions and (session or project):
        raise BadInput("--all excludes --session and --project", fix="pass one of them")
    scope.require_database()
    conn = db.open_db()
    try:
        if all_sessions:
            project_dir = None
            pks, projects = backlog.scope_of(conn, all_sessions=True, session_pks=[], project_id=None)
        else:
            where = scope.resolve(conn, session=session, harness=harness, project=str(project) if project else None,
                                  cwd=os.getcwd())
            project_dir = where.project_dir
            pks, projects = backlog.scope_of(conn, all_sessions=False, session_pks=where.session_pks,
                                             project_id=where.project_id)
        config = load_config(Path(project_dir) if project_dir else None).config
        if config.embedding.provider == "off":
            raise CheckFailed("embedding.provider is 'off': there is nothing to embed (search uses FTS only)",
                              fix="set embedding.provider = 'local' or 'openai-compatible' in config.toml")
        embedder = providers.from_config(config)
        if embedder is None:  # pragma: no cover - `off` was answered above
            raise CheckFailed("embedding.provider is 'off': there is nothing to embed")
        result = _run(conn, embedder, pks, projects, max_blocks, backlog)
    finally:
        conn.close()
    if result.not_installed:
        raise CheckFailed("the local embedding model is not installed",
                          fix="pip install 'magic-context[embeddings]' or set embedding.provider = 'off'")
    from magic_context.results import Problem, Status

    problems = () if result.error is None else (Problem(
        "embedding_failed", f"embedding stopped: {result.error}",
        "fix the provider and run the same command again: what was embedded is kept"),)
    outcome = Result("embed", result.as_dict(), Status.FAILED if problems else Status.OK, problems)
    if problems and not as_json:
        _render(outcome)
        raise CheckFailed(problems[0].message, fix=problems[0].fix)
    _output.emit(outcome, as_json=as_json, human=_render)
    if problems:
        raise typer.Exit(1)


def _render(outcome: Result) -> None:
    from magic_context.search.backlog import KIND_NAMES

    data = outcome.data
    done = ", ".join(f"{data['embedded'][k]} {name}" for k, name in KIND_NAMES.items())
    skipped = sum(data["skipped"].values())
    line = (f"embedded {done} ({data['messages']} messages) for {data['model']} across {data['sessions']} "
            f"session(s); {skipped} already current")
    left = sum(data["left"].values()) + sum(data["failed"].values())
    if left:
        line += f"; {left} left — run the command again to continue"
    _output.console().print(line, soft_wrap=True)


def _run(conn, embedder, pks: list[int], projects: list[str], max_blocks: int | None, backlog):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from magic_context.search.backlog import KIND_NAMES

    with Progress(TextColumn("embedding {task.fields[kind]}"), BarColumn(), MofNCompleteColumn(),
                  console=_output.err_console(), transient=True) as bar:
        task = bar.add_task("embed", total=None, kind="")

        def advance(done: int, total: int, kind: str) -> None:
            bar.update(task, completed=done, total=total, kind=KIND_NAMES.get(kind, kind))

        return backlog.run(conn, embedder, session_pks=pks, project_ids=projects, max_blocks=max_blocks,
                           progress=advance)


def register(app: typer.Typer) -> None:
    app.command("embed")(embed)


__all__ = ["embed", "register"]
