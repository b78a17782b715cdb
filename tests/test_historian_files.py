"""File paths in the extractive historian's compartments (issue #13 item 1): which paths a command names,
the two-part short form, the budgeted lists, and that every tier of a folded compartment keeps the
files the work acted on visible in the form `mc replay`'s anchor retention looks for."""

from __future__ import annotations

import pytest
from historian_helpers import PiBuilder

from magic_context import tokens
from magic_context.history import chunk, extractive, files
from magic_context.history.validate import validate_historian_output
from magic_context.replay import anchors
from magic_context.store.raw import message_tokens
from magic_context.wire import model as m
from magic_context.wire import pi


@pytest.mark.parametrize(("path", "expected"), [
    ("packages/coding-agent/src/theme/theme.ts", "theme/theme.ts"),
    ("/Users/x/repo/django/db/models/base.py", "models/base.py"),
    ("./src/../lib/a.py", "lib/a.py"),
    ("src/a.py", "src/a.py"),
    ("./a.py", "a.py"),
])
def test_short_keeps_the_last_two_parts(path: str, expected: str) -> None:
    assert files.short(path) == expected


@pytest.mark.parametrize(("command", "expected"), [
    ('grep -n "collapse\\|Changelog" packages/coding-agent/src/settings-manager.ts | head -20',
     ["packages/coding-agent/src/settings-manager.ts"]),
    # the sed expression names import specifiers (text, not operands); the edited file is the operand
    ("""sed -i '' 's|from "./changelog.js"|from "./utils/changelog.js"|g' src/main.ts""", ["src/main.ts"]),
    # every line of a script counts; comments and heredoc bodies do not
    ("cd /repo/src\n\n# Fix core/bash.ts imports\nsed -i 's|a|b|' core/tools/bash.ts\n"
     "cat <<'EOF' > /tmp/repro.py\nfrom django.db import x  # see django/db/models/base.py\nEOF\npython /tmp/repro.py",
     ["core/tools/bash.ts", "/tmp/repro.py"]),
    ('python -c "open(\'django/db/models/base.py\').read()"', []),
    ('cat "django/db/models/base.py" && curl -s https://example.org/a/b.json -o out/b.json',
     ["django/db/models/base.py", "out/b.json"]),
    ("ls -la", []),
    ("python -m pytest tests/test_a.py::test_x -q", ["tests/test_a.py"]),
])
def test_command_paths_are_the_file_operands(command: str, expected: list[str]) -> None:
    assert files.command_paths(command) == expected


def test_text_paths_in_prose() -> None:
    text = "read @packages/app/src/main.ts, then see https://x.org/docs/a.md and lib/util.py; v1.2.3 is no path"
    assert files.text_paths(text) == ["@packages/app/src/main.ts", "lib/util.py"]
    assert files.text_paths("no paths here") == []


def test_listing_keeps_to_its_budget_and_says_what_it_left_out() -> None:
    paths = ["a/b/one.py", "c/d/two.py", "x/d/two.py", "e/f/three.py", "g/h/four.py"]
    assert files.listing(paths, 1_000) == "b/one.py, d/two.py, f/three.py, h/four.py"  # d/two.py once
    assert files.listing(paths, 22) == "b/one.py, d/two.py (+2 more)"
    assert files.listing(paths, 1_000, shown="see a/b/one.py") == "d/two.py, f/three.py, h/four.py"
    assert files.listing(paths, 5) == ""  # nothing fits: nothing to say
    assert files.listing([], 100) == ""


def _bash_session() -> PiBuilder:
    """A shell-only stretch of work: files looked at through grep/cat, edited with sed, a test run."""
    b = PiBuilder().user("the slug of a saved parent is lost; look at django/db/models/base.py and fix it")
    b.call("bash", {"command": "grep -n 'def save' django/db/models/base.py"}, "672:    def save(self):")
    b.call("bash", {"command": "cat django/db/models/fields/related.py | head -50"}, "class ForeignKey: ...")
    b.call("bash", {"command": "sed -i 's|old = \"a/b.py\"|new|' django/db/models/fields/related_descriptors.py"},
           "")
    for i in range(6):
        b.call("edit", {"path": f"/work/syn/django/contrib/app{i}/models.py", "oldText": "a", "newText": "b"},
               "Successfully replaced text")
    b.call("bash", {"command": "python -m pytest tests/model_fields/test_foreignkey.py -q"}, "3 passed")
    return b.say("Fixed: pre_save now reads the parent's new primary key in django/db/models/base.py.")


def _compartment(builder: PiBuilder) -> tuple[list[m.Message], extractive.Draft]:
    messages = pi.decode(builder.messages)
    for i, msg in enumerate(messages):
        msg.ordinal = i
    digests, spans = chunk.digest_messages(messages, [message_tokens(x, tokens.estimate) for x in messages],
                                           root="/work/syn")
    c = chunk.build_chunk(digests, spans, start=0, end=len(digests) - 1, budget=50_000)
    out = validate_historian_output(extractive.extractive_output(c, target=100_000), c.start, c.end,
                                    tool_only=c.tool_only, tool_arcs=c.arcs, emergency=True)
    assert len(out.compartments) == 1
    comp = out.compartments[0]
    return messages, extractive.Draft(comp.start, comp.end, comp.title, comp.p1 or "", comp.p2 or "", comp.p3 or "",
                                      comp.p4 or "",
                                      comp.importance or 0, comp.episode_type or "")


def test_every_tier_names_the_files_with_their_directory() -> None:
    _, draft = _compartment(_bash_session())
    # p1: reads and edits in full as before (a `sed -i` counts as an edit), then the files only commands
    # or the person named, short, unless the line already shows them (the pytest file is in `ran …`)
    assert "Edited django/db/models/fields/related_descriptors.py, django/contrib/app0/models.py" in draft.p1
    assert draft.p1.count("; files ") == 1
    assert "; files models/base.py, fields/related.py → A:" in draft.p1  # not a/b.py from the sed expression
    # p2 lists what its sentence left out
    assert "Files fields/related.py, model_fields/test_foreignkey.py." in draft.p2
    # p3 names edited files with their directory (it said `models.py, models.py, models.py` before)
    assert "edited 7 files (fields/related_descriptors.py, app0/models.py, app1/models.py" in draft.p3
    assert "; looked at models/base.py, fields/related.py (+1 more)" in draft.p3
    # p4: edited first, then the others, in a bounded list that says how many it left out
    assert draft.p4.startswith("fields/related_descriptors.py, app0/models.py, app1/models.py")
    assert draft.p4.endswith(" (+3 more)") and len(draft.p4) <= extractive.P4_FILE_CHARS + len(" (+3 more)")
    assert len(draft.p3) < 400


def test_folded_tiers_keep_the_path_anchors_replay_measures() -> None:
    """What `mc replay` counts as a retained path (its last two parts visible in the request) holds for
    every file the work read, edited or ran a command on, at P1, P2, P3 and, within its budget, P4."""
    messages, draft = _compartment(_bash_session())
    acted = {"models/base.py", "fields/related.py", "fields/related_descriptors.py",
             "model_fields/test_foreignkey.py", *(f"app{i}/models.py" for i in range(6))}
    for tier, text in (("p1", draft.p1), ("p2", draft.p2), ("p3", draft.p3), ("p4", draft.p4)):
        served = [m.Message("head", m.USER, blocks=[m.Block(m.TEXT, text=f"<session-history>\n{text}\n"
                                                                        "</session-history>")])]
        report = anchors.retention(messages, served)
        total, kept = report.counts["paths"]
        assert total >= len(acted)
        missing = {a.split(": ", 1)[1] for a in report.missing if a.startswith("path:")}
        assert len(missing) == total - kept  # the report lists every missing path (it stops at 12)
        if tier in ("p1", "p2"):
            assert not missing & acted, (tier, missing)
        else:  # the terse tiers keep to their budget: most, never none
            assert len(acted - missing) >= 6, (tier, missing)
