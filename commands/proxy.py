"""`mc proxy`: the resident local proxy for clients without a message hook (Claude Code, Codex, any client)."""

from __future__ import annotations

import json
import sys

import typer

from commands import _config_notes, _output
from magic_context.results import Result

proxy_app = typer.Typer(invoke_without_command=True, no_args_is_help=False)


@proxy_app.callback(invoke_without_command=True)
def proxy(
    ctx: typer.Context,
    port: int = typer.Option(None, "--port", help="Port to listen on (default: proxy.port, 8790; 0 picks a free one)."),
    host: str = typer.Option(None, "--host", help="Address to bind (default: proxy.host, 127.0.0.1)."),
    upstream_anthropic: str = typer.Option(None, "--upstream-anthropic", metavar="URL",
                                           help="Where Anthropic requests go (default: https://api.anthropic.com)."),
    upstream_openai: str = typer.Option(None, "--upstream-openai", metavar="URL",
                                        help="Where OpenAI requests go (default: https://api.openai.com)."),
    daemon: bool = typer.Option(False, "--daemon", help="Run in the background; `mc proxy stop` stops it."),
) -> None:
    """The resident local proxy: point a client's base URL at it (model requests get the pass).

    \b
    Model requests (POST /v1/messages, /v1/chat/completions, /v1/responses)
    are rewritten in process and forwarded; other paths pass through.
    Prints one JSON line on stdout once listening; SIGTERM or Ctrl-C stop
    it gracefully (in-flight answers finish).
    \b
    Examples:
      mc proxy --port 8790
      ANTHROPIC_BASE_URL=http://127.0.0.1:8790 claude
      mc proxy --daemon && mc proxy status
    """
    if ctx.invoked_subcommand is not None:
        return
    from magic_context.proxy import lifecycle, settings

    resolved, _warnings = settings.resolve(host=host, port=port, upstream_anthropic=upstream_anthropic,
                                           upstream_openai=upstream_openai)
    _config_notes.flush()  # now, not when the proxy stops: each config problem once (the boundary's format)
    if daemon:
        args = ["--host", resolved.host, "--port", str(resolved.port), "--upstream-anthropic",
                resolved.upstream_anthropic, "--upstream-openai", resolved.upstream_openai]
        _announce(lifecycle.start_background(args))
        return
    from commands.main import _debug_enabled

    lifecycle.serve(resolved, on_ready=_announce, debug=_debug_enabled(sys.argv))


def _announce(record: dict) -> None:
    """The one start-up line on stdout."""
    sys.stdout.write(json.dumps({"event": "listening", **record}, sort_keys=True) + "\n")
    sys.stdout.flush()


@proxy_app.command("status")
def status(as_json: bool = typer.Option(False, "--json", help="Print a JSON envelope on stdout.")) -> None:
    """Show whether the proxy runs, where, and what it has done; exit 1 when it is not running.

    \b
    Examples:
      mc proxy status
      mc proxy status --json
    """
    from magic_context.proxy import lifecycle

    result = lifecycle.status()
    _output.emit(result, as_json=as_json, human=_render_status)
    if result.failed:
        raise typer.Exit(1)


def _render_status(result: Result) -> None:
    data = result.data
    out = _output.console()
    if not data["running"]:
        stale = " (its record was stale: the process is gone)" if data.get("stale_record") else ""
        out.print(f"mc proxy is not running{stale}. Start it with `mc proxy` or `mc proxy --daemon`.")
        return
    if not data.get("responding"):
        out.print(f"mc proxy (pid {data['pid']}) runs at {data['address']} but does not answer: {data['error']}")
        return
    counts = data.get("counts", {})
    out.print(f"[bold]mc proxy[/bold] {data['address']}  (pid {data['pid']}, mc {data.get('mc_version')}, "
              f"up {data.get('uptime_s', 0):.0f}s, {data.get('in_flight', 0)} in flight)")
    for name, url in data.get("upstreams", {}).items():
        out.print(f"  upstream {name:9} {url}")
    out.print(f"  requests {counts.get('requests', 0)}: {counts.get('rewritten', 0)} rewritten, "
              f"{counts.get('forwarded_unchanged', 0)} forwarded unchanged, {counts.get('refused', 0)} refused, "
              f"{counts.get('upstream_errors', 0)} upstream errors; usage recorded {counts.get('usage_recorded', 0)}×")
    out.print(f"  log      {data.get('log_file')}", markup=False, highlight=False, soft_wrap=True)


@proxy_app.command("stop")
def stop(
    timeout: float = typer.Option(130.0, "--timeout", help="Seconds to wait for in-flight answers to finish."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON envelope on stdout."),
) -> None:
    """Stop the running proxy gracefully (SIGTERM); exit 1 when none runs or it did not stop in time.

    \b
    Examples:
      mc proxy stop
      mc proxy stop --timeout 10 --json
    """
    from magic_context.proxy import lifecycle

    result = lifecycle.stop(timeout)
    _output.emit(result, as_json=as_json, human=_render_stop)
    if result.failed:
        raise typer.Exit(1)


def _render_stop(result: Result) -> None:
    data = result.data
    if data["stopped"]:
        _output.console().print(f"stopped mc proxy (pid {data['pid']}) at {data.get('address')}")
    else:
        _output.console().print(data["reason"])


def register(app: typer.Typer) -> None:
    app.add_typer(proxy_app, name="proxy")


__all__ = ["proxy_app", "register"]
