"""The Typer CLI: one thin module per command (parse → call the engine → render)."""
