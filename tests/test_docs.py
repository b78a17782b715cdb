"""Docs that cannot drift: one walk of the command tree (`commands._docs`) checks every command and flag is
documented, every example still parses, the README's command table is the generated one, and the
`mc transform` flags agree between the hot path's parser, the Typer command and the README."""

from __future__ import annotations

import shlex

import pytest

from commands import _docs
from magic_context.transform import flags, hook

DOCS = _docs.walk()


def test_the_walk_sees_every_command() -> None:
    names = {doc.name for doc in DOCS}
    assert {"mc transform", "mc status", "mc reduce", "mc wrapup", "mc replay", "mc migrate", "mc doctor",
            "mc setup", "mc proxy", "mc proxy status", "mc proxy stop"} <= names
    (wrapup,) = [d for d in DOCS if d.path == ("wrapup",)]
    assert "--background" not in {f.names[0] for f in wrapup.flags}  # hidden: the transform's own detached run


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_command_and_flag_has_help_and_the_command_an_example(doc: _docs.CommandDoc) -> None:
    assert doc.summary, f"{doc.name} has no help"
    undocumented = [f.names[0] for f in doc.flags if not f.help.strip() and not f.argument]
    assert not undocumented, f"{doc.name}: flags without help: {undocumented}"
    assert doc.examples, f"{doc.name}: its help has no Example(s) section with an `mc …` line"


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_example_still_parses(doc: _docs.CommandDoc) -> None:
    """An example naming a removed or misspelled flag fails here, not in a user's terminal."""
    command = _docs.find(doc.path)
    for example in doc.examples:
        # a pipeline (`mc memory export | mc memory import -`): the stage that runs this command
        stages = [shlex.split(stage.split(" < ")[0]) for stage in example.split(" | ")]
        words = next((w for w in stages if w[:len(doc.path) + 1] == ["mc", *doc.path]), None)
        assert words is not None, f"{doc.name}: example {example!r} does not run it"
        command.make_context(doc.name, words[len(doc.path) + 1:])  # raises on an unknown flag or bad value


def test_readme_command_table_is_the_generated_one() -> None:
    text = _docs.README.read_text(encoding="utf-8")
    assert _docs.updated_readme(text, _docs.readme_table(DOCS)) == text, \
        "README command table is stale: run `python -m commands._docs --update-readme`"
    assert _docs.main(["--check"]) == 0


def test_transform_flags_are_declared_once() -> None:
    (doc,) = [d for d in DOCS if d.path == ("transform",)]
    typer_flags = {f.names[0]: (f.metavar, f.help) for f in doc.flags}
    assert typer_flags == flags.FLAGS  # the Typer face takes names, metavars and help from the one table
    assert hook.USAGE == flags.USAGE == "usage: " + doc.synopsis()
    assert set(hook.parse_args([])) == set(flags.BOOL_FLAGS)
    parsed = hook.parse_args([arg for flag in flags.VALUE_FLAGS for arg in (flag, "7")])
    assert all(parsed[flag] == "7" for flag in flags.VALUE_FLAGS)
    readme = _docs.README.read_text(encoding="utf-8")
    assert f"| `{doc.synopsis()}` |" in readme
