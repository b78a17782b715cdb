"""The root Typer app: registers one sub-app module per working command."""

from __future__ import annotations

import typer

from magic_context import __version__


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"mc {__version__}")
        raise typer.Exit()


def build_app() -> typer.Typer:
    """Build the command tree (used by the entry point, docs generators and tests)."""
    from commands import (
        doctor,
        embed,
        expand,
        memory,
        migrate,
        note,
        proxy,
        reduce,
        replay,
        search,
        setup,
        status,
        transform,
        wrapup,
    )

    app = typer.Typer(
        name="mc",
        help="mc (magic-context): keep an agent's long session inside its context window, cache intact.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )

    @app.callback()
    def _root(
        version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                     help="Print the version and exit."),
        debug: bool = typer.Option(False, "--debug", help="Print tracebacks for errors (or MAGIC_CONTEXT_DEBUG=1)."),
    ) -> None:
        """Keep an AI coding agent's long session inside its context window without breaking the prompt cache."""

    for module in (transform, status, reduce, memory, note, wrapup, search, embed, expand, replay, migrate, doctor,
                   setup, proxy):
        module.register(app)
    return app


def build_command():
    import typer.main

    return typer.main.get_command(build_app())


__all__ = ["build_app", "build_command"]
