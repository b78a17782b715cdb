"""`mc status`: context use, tags, pending drops, compartments, historian, recent passes, paths."""

from __future__ import annotations

from pathlib import Path

import typer

from commands import _output


def status(
    session: str = typer.Option(None, "--session", help="Session id (default: the most recently active session)."),
    latest: bool = typer.Option(False, "--latest", help="Show the most recently active session."),
    harness: str = typer.Option(None, "--harness", help="Disambiguate a session id used by several harnesses."),
    project: Path = typer.Option(None, "--project", help="Limit --latest to sessions of this project."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON envelope on stdout."),
) -> None:
    """Show what mc is doing for a session.

    \b
    Examples:
      mc status --latest
      mc status --session ses_abc123 --json
    """
    from magic_context import project as project_identity
    from magic_context import status as engine
    from magic_context.store import db

    conn = db.open_for_reading()  # before the first pass: "no sessions yet", no database created
    try:
        project_id = project_identity.identity(project) if project and not session else None
        result = engine.report(conn, session_id=None if latest and not session else session, harness=harness,
                               project_id=project_id, project_dir=project)
    finally:
        conn.close()
    from magic_context.config.secrets import redacted

    _output.emit(result, as_json=as_json, human=lambda r: _render(r.data),
                 redact=lambda value: redacted(value, project))  # stored errors may echo a configured key


def _bar(percent: float | None, width: int = 30) -> str:
    if percent is None:
        return "[" + " " * width + "]"
    filled = min(width, round(width * percent / 100))
    return "[" + "█" * filled + "·" * (width - filled) + "]"


def _render(data: dict) -> None:
    out = _output.console()
    if data.get("session") is None:
        out.print("No sessions yet: pipe a request through `mc transform` first.")
    else:
        s, ctx, tags = data["session"], data["context"], data["tags"]
        out.print(f"[bold]{s['harness']}[/bold] session {s['session_id']}  ({s['agent']}, model {s['model'] or '?'})")
        percent = ctx["percent"]
        out.print(f"context  {_bar(percent)} {ctx['used_tokens']:,} / {ctx['limit_tokens']:,} tokens"
                  + (f" ({percent}%)" if percent is not None else ""))
        recorded = ctx.get("last_response_usage")
        if recorded:
            cached = recorded["cache_read_input_tokens"] + recorded["cache_creation_input_tokens"]
            out.print(f"provider last response: {recorded['input_tokens'] + cached:,} prompt tokens "
                      f"({recorded['cache_read_input_tokens']:,} read from cache), "
                      f"{recorded['output_tokens']:,} output (recorded by mc proxy)")
        pending = len(data["pending_drops"])
        out.print(f"tags     {tags['active']} active, {tags['dropped']} dropped, {pending} pending drops")
        out.print(f"history  {data['raw_messages']} raw messages, {len(data['compartments'])} compartments, "
                  f"{data['memories']} memories")
        counts, notes = data.get("memory") or {}, data.get("notes") or {}
        if counts.get("total") or any(notes.values()):
            shown = ", ".join(f"{counts[k]} {k}" for k in ("active", "permanent", "archived", "expired")
                              if counts.get(k))
            waiting = notes.get("active", 0)
            out.print(f"memory   {shown or 'none visible'}; notes: {waiting} waiting, {notes.get('ready', 0)} ready, "
                      f"{notes.get('pending', 0)} pending a condition")
        historian = data["historian"]
        state = historian["state"]
        line = f"historian {state.get('state', 'idle') if isinstance(state, dict) else state}"
        if isinstance(state, dict) and state.get("last_status"):
            via = f" via {state['last_provider']}" if state.get("last_provider") else ""
            line += f" (last run: {state['last_status']}{via})"
        if historian.get("last_failure"):
            line += f" (last failure: {historian['last_failure']})"
        out.print(line)
        search = data.get("search") or {}
        if search:
            vectors = sum((search.get("vectors") or {}).values())
            line = (f"search   {search.get('indexed_messages', 0)} messages indexed (through ordinal "
                    f"{search.get('searchable_through')}), {vectors} vector rows")
            embedding = search.get("embedding") or {}
            if embedding.get("provider") == "off":
                line += "; embeddings off (FTS only)"
            elif embedding.get("installed") is False:
                line += "; embeddings local not installed (FTS only)"
            elif embedding.get("provider"):
                line += f"; embeddings {embedding['provider']} ({embedding.get('model') or 'no model set'})"
                if embedding.get("min_similarity"):
                    from magic_context.search.lanes import floors_text

                    line += "; " + floors_text(embedding["min_similarity"], embedding.get("min_similarity_from", ""))
            failure = search.get("last_embedding_failure")
            if failure:
                line += f" — embeddings failing, FTS only: {failure.get('message')}"
            out.print(line, soft_wrap=True)
            backlog = _backlog_line(embedding, data)
            if backlog:
                out.print(backlog, soft_wrap=True)
        fallbacks = data.get("fallbacks")
        if fallbacks:
            out.print(f"[yellow]fallback[/yellow] {fallbacks['count']} pass(es) served the {fallbacks['served']} "
                      f"instead of a real pass; last: {fallbacks['last_reason']}")
        cache = data["cache"]
        out.print(f"cache    ~{cache['read_share']:.0%} of input tokens read from cache over the recorded passes")
        if data["passes"]:
            from rich.table import Table

            table = Table("pass", "bust", "reason", "before", "after", "ms", box=None, header_style="bold")
            for report in data["passes"]:
                table.add_row(report.get("pass", "?"), "yes" if report.get("bust") else "no",
                              str(report.get("reason", ""))[:72], f"{report.get('tokens_before', 0):,}",
                              f"{report.get('tokens_after', 0):,}", f"{report.get('ms', 0):.1f}")
            out.print(table)
            last_warnings = data["passes"][-1].get("warnings") or []
            if last_warnings:
                from rich.markup import escape

                out.print("[yellow]last pass warnings[/yellow]", soft_wrap=True)
                for text in last_warnings:
                    out.print(f"  {escape(str(text))}", soft_wrap=True)
    _render_config(out, data)
    out.print("[bold]paths[/bold]")
    for name, value in data["paths"].items():
        out.print(f"  {name:12} {value}")


def _backlog_line(embedding: dict, data: dict) -> str | None:
    """"embeddings: 812 of 896 message blocks missing for MODEL; run `mc embed --session ID`" when vectors for
    the configured model are missing (after a provider change, or while the provider was down)."""
    from magic_context.search.backlog import describe_missing

    counts = describe_missing(embedding.get("missing") or {})
    if counts is None:
        return None
    session = (data.get("session") or {}).get("session_id")
    where = f"--session {session}" if session else "--all"
    return (f"embeddings: {counts} missing for {embedding.get('model')}; run `mc embed {where}` "
            "(semantic search covers only what has vectors)")


def _render_config(out, data: dict) -> None:
    from rich.markup import escape

    config = data.get("config") or {}
    problems = config.get("warnings") or []
    files = ", ".join(config.get("files") or []) or "no config files: every default"
    if not problems:
        out.print(f"config   ok ({escape(files)})", soft_wrap=True)
        return
    out.print(f"[yellow]config[/yellow]   {len(problems)} problem(s); the affected keys use their defaults "
              "(`mc doctor` checks them):", soft_wrap=True)
    for text in problems:
        out.print(f"  {escape(text)}", soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("status")(status)


__all__ = ["register", "status"]
