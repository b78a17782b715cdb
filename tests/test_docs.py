"""Docs that cannot drift: one walk of the command tree (`commands._docs`) checks every command and flag is
documented, every example still parses, the README's command table is the generated one, and the
`mc transform` flags agree between the hot path's parser, the Typer command and the README."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys

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


def _roff_name(name: str) -> str:
    return name.replace("-", "\\-")


def test_man_page_is_generated_from_the_walk(tmp_path) -> None:
    """`python -m commands._docs --man DIR` writes mc.1 naming every command and flag; groff renders it
    without a warning."""
    proc = subprocess.run([sys.executable, "-m", "commands._docs", "--man", str(tmp_path)], capture_output=True,
                          cwd=_docs.README.parent, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    page = (tmp_path / "mc.1").read_text(encoding="utf-8")
    assert page.startswith(".TH MC 1 ") and page.isascii()
    for doc in DOCS:
        assert f'.SS "{_roff_name(doc.name)}"' in page, doc.name
        for flag in doc.flags:
            assert all(_roff_name(name) in page for name in flag.names), (doc.name, flag.names)
        assert all(_roff_name(example) in page for example in doc.examples), doc.name
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed: the page's roff is not rendered")
    rendered = subprocess.run(["groff", "-man", "-Tutf8", "-ww"], input=page.encode(), capture_output=True,
                              check=False)
    assert rendered.returncode == 0 and rendered.stderr == b"", rendered.stderr.decode()
    text = re.sub(r".\x08", "", rendered.stdout.decode())  # no overstrike bold
    assert "mc memory list" in text and "--all-projects" in text and "130" in text


def test_bash_completion_completes_every_command_and_its_flags(tmp_path) -> None:
    """Real bash sources the generated script and completes: the words typed pick the command, its
    subcommands and flags come back."""
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    proc = subprocess.run([sys.executable, "-m", "commands._docs", "--completion", "bash"], capture_output=True,
                          cwd=_docs.README.parent, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    script = tmp_path / "mc.bash"
    script.write_bytes(proc.stdout)
    lines = ['complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _mc; '
             'echo "${COMPREPLY[*]}"; }']
    cases = [(("mc", ""), None), (("mc", "memory", ""), None)]
    cases += [(("mc", *doc.path, "--"), doc) for doc in DOCS]
    lines += ["complete_words " + " ".join(shlex.quote(w) for w in words) for words, _ in cases]
    out = subprocess.run(["bash", "-c", f"source {shlex.quote(str(script))}\n" + "\n".join(lines)],
                         capture_output=True, check=False)
    assert out.returncode == 0, out.stderr.decode()
    replies = [set(line.split()) for line in out.stdout.decode().splitlines()]
    assert len(replies) == len(cases)
    top = {doc.path[0] for doc in DOCS}
    assert replies[0] >= top | {"--version", "--help"}
    assert replies[1] == {doc.path[1] for doc in DOCS if doc.path[0] == "memory" and len(doc.path) == 2} | {"--help"}
    for (words, doc), reply in zip(cases[2:], replies[2:], strict=True):
        expected = {n for f in doc.flags if not f.argument for n in f.names if n.startswith("--")} | {"--help"}
        assert reply == expected, words
