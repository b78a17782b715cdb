"""What a model historian is sent, and what it is asked to write back (#13: the model-priced historian).

The request is real: a run in trigger/keep mode against the fake provider server (tests/fake_llm_server.py),
whose recorded request bodies are checked. Lean by design — a small instruction block, earlier compartments
by title with only the newest one condensed, the chunk — and the answer needs no `<meta>` when it covers
its chunk, so neither the model nor the extractive historian pays output tokens for it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, RecordedRequest
from historian_helpers import NOW, PiBuilder, compartments, store_pi

from magic_context import tokens
from magic_context.history import chunk, extractive, prompt, runner
from magic_context.history.validate import validate_historian_output

KEY_ENV = "MC_TEST_HISTORIAN_REQUEST_KEY"
_RANGE = re.compile(r'<new_messages first="(\d+)" last="(\d+)">')
_REFS = re.compile(r"<session_references>\n(.*?)\n</session_references>", re.S)
SYSTEM_TOKEN_CEILING = 600  # was 774 before #13's trim; every rule is still stated


def _answer(request: RecordedRequest) -> str:
    """A model answer as asked: the whole chunk in one compartment, p2 and p3 only, without `<meta>`."""
    first, last = _RANGE.search(request.prompt).groups()
    return (f'<output><compartments><compartment start="{first}" end="{last}" title="Ported modules {first}-{last}" '
            f'episode_type="refactor" importance="55"><p2>Condensed account of {first}-{last}: ported to keep one '
            f"api.</p2><p3>Ported.</p3></compartment></compartments></output>")


def _full_answer(request: RecordedRequest) -> str:
    """An answer in the older four-tier format: published as sent."""
    first, last = _RANGE.search(request.prompt).groups()
    return (f'<output><compartments><compartment start="{first}" end="{last}" title="Ported modules {first}-{last}" '
            f'episode_type="refactor" importance="55"><p1>U: port the modules; edited src/m{first}.py</p1>'
            f"<p2>Condensed account of {first}-{last}.</p2><p3>Ported.</p3><p4>src/m{first}.py</p4>"
            f"</compartment></compartments></output>")


@pytest.fixture
def model(isolated_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(KEY_ENV, "sk-test-historian-request-0123456789")
    with FakeLLMServer() as server:
        server.script([], default=_answer)
        isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
        (isolated_dirs["config"] / "config.toml").write_text(
            f'[historian]\nprovider = "anthropic"\nfallback = ["extractive"]\n\n[historian.anthropic]\n'
            f'base_url = "{server.url}"\nmodel = "claude-sonnet-test"\napi_key_env = "{KEY_ENV}"\n', encoding="utf-8")
        yield server


def test_the_request_a_model_historian_is_sent(conn, model: FakeLLMServer) -> None:
    b = PiBuilder()
    pk = 0
    for round_ in range(8):  # eight runs, each on two new turns: the later ones have earlier compartments
        for i in range(2):
            b.turn(f"please port module {round_}-{i} to the new api", f"src/m{round_}{i}.py", padding=400)
        pk = store_pi(conn, b.messages)
        result = runner.run_once(conn, pk, keep=2, now_ms=NOW + round_)
        assert result.status == runner.PUBLISHED and result.provider == "anthropic"
    requests = list(model.requests)
    assert len(requests) == 8
    rows = compartments(conn, pk)
    assert len(rows) == 8 and [r["end_ordinal"] + 1 for r in rows[:-1]] == [r["start_ordinal"] for r in rows[1:]]

    # the instructions: one fixed block, under the ceiling, asking for <meta> only when the answer stops early
    assert {r.system for r in requests} == {prompt.SYSTEM_PROMPT}
    assert tokens.count_exact(prompt.SYSTEM_PROMPT) <= SYSTEM_TOKEN_CEILING
    assert "<unprocessed_from>" in prompt.SYSTEM_PROMPT and "otherwise omit <meta>" in prompt.SYSTEM_PROMPT

    # the first run has nothing to refer to; the last refers to the six before it by range and title, and
    # only the newest one carries its condensed text (p2)
    assert "<session_references>" not in requests[0].prompt
    refs = _REFS.search(requests[-1].prompt).group(1).splitlines()
    earlier = rows[-7:-1]
    headings = [f"## {r['start_ordinal']}-{r['end_ordinal']} · {r['title']}" for r in earlier]
    assert refs == [*headings, earlier[-1]["p2"]]
    assert all(r["p2"] not in requests[-1].prompt for r in earlier[:-1])

    # the chunk: exactly the messages after the last compartment, and the answer without <meta> published whole
    first, last = map(int, _RANGE.search(requests[-1].prompt).groups())
    assert (first, last) == (rows[-1]["start_ordinal"], rows[-1]["end_ordinal"])


def test_answers_need_no_meta_when_they_cover_the_chunk(conn) -> None:
    b = PiBuilder()
    for i in range(6):
        b.turn(f"please port module {i} to the new api", f"src/m{i}.py", padding=400)
    pk = store_pi(conn, b.messages)
    plan = runner.plan(conn, pk, keep=4, emergency=False, protect_tokens=0, budget=chunk.chunk_budget(),
                       harness="pi", project_dir="/work/syn")
    the_chunk = plan.chunk
    assert the_chunk is not None and not the_chunk.empty
    text = extractive.extractive_output(the_chunk)
    assert "<meta>" not in text and "<unprocessed_from>" not in text
    done = validate_historian_output(text, the_chunk.start, the_chunk.end, tool_only=the_chunk.tool_only,
                                     tool_arcs=the_chunk.arcs, emergency=True)
    assert done.next_start == the_chunk.end + 1 and done.unprocessed_from is None
    # a model that stops early (after the first turn, messages 0-5) says where; the rest waits for the next run
    assert the_chunk.start == 0 and the_chunk.end > 6

    def early(meta: str) -> str:
        return ('<output><compartments><compartment start="0" end="5" title="t" episode_type="docs" '
                f'importance="5"><p1>x</p1><p2>x</p2><p3>x</p3><p4/></compartment></compartments>{meta}</output>')

    kept = validate_historian_output(early("<meta><unprocessed_from>6</unprocessed_from></meta>"), the_chunk.start,
                                     the_chunk.end, tool_only=the_chunk.tool_only, tool_arcs=the_chunk.arcs,
                                     emergency=True)
    assert kept.unprocessed_from == 6 == kept.next_start
    # one that stops early without saying so is rejected, and the validator's message says what to add
    with pytest.raises(Exception, match="without <unprocessed_from>"):
        validate_historian_output(early(""), the_chunk.start, the_chunk.end, tool_only=the_chunk.tool_only,
                                  tool_arcs=the_chunk.arcs, emergency=True)


def test_a_model_writes_p2_and_p3_and_code_writes_p1_and_p4(conn, model: FakeLLMServer) -> None:
    """#13: a model is asked only for what code cannot derive. Its compartment at tier p1 leads with the model's
    own account (p2), then code's record of the range (each request verbatim, the files read and edited, the
    agent's closing words); p4 lists the files. An answer that still sends all four tiers is published as sent."""
    assert "<p1>" not in prompt.SYSTEM_PROMPT and "<p4>" not in prompt.SYSTEM_PROMPT
    b = PiBuilder()
    for i in range(3):
        b.turn(f"please port module {i} to the new api", f"src/m{i}.py", padding=400)
    pk = store_pi(conn, b.messages)
    result = runner.run_once(conn, pk, keep=2, now_ms=NOW)
    assert result.status == runner.PUBLISHED and result.provider == "anthropic"
    (row,) = compartments(conn, pk)
    first, last = row["start_ordinal"], row["end_ordinal"]
    account = f"Condensed account of {first}-{last}: ported to keep one api."
    assert row["p2"] == account and row["p3"] == "Ported."
    p1_lines = row["p1"].splitlines()
    assert p1_lines[0] == account
    assert any(line.startswith(f"[{first}-") and 'U: "please port module 0 to the new api"' in line
               for line in p1_lines[1:])
    assert 'U: "please port module 1 to the new api"' in row["p1"] and "src/m1.py" in row["p1"]
    assert "Updated src/m1.py as asked" in row["p1"]  # the agent's closing words
    assert "m0.py" in row["p4"] and "m1.py" in row["p4"]
    assert row["content"] == row["p1"]
    # what the model wrote back (billed at the output price) is the short answer, not the record
    (call,) = [a for a in result.attempts if a.ok]
    assert call.output_tokens < tokens.estimate(row["p1"])

    model.script([_full_answer])
    b.turn("please port module 3 to the new api", "src/m3.py", padding=400)
    b.turn("please port module 4 to the new api", "src/m4.py", padding=400)
    pk = store_pi(conn, b.messages)
    assert runner.run_once(conn, pk, keep=2, now_ms=NOW + 1).status == runner.PUBLISHED
    newest = compartments(conn, pk)[-1]
    assert newest["p1"].startswith("U: port the modules; edited src/m") and newest["p4"].startswith("src/m")
