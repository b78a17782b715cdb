"""Property tests of the transform's invariants over generated sessions in all five formats.

For every generated conversation, each request a harness would send (the history before each
assistant turn) is served in order, with random ctx_reduce calls and clock gaps between passes:
* a defer pass replays the previous output byte-identically as its prefix;
* serving the same request twice gives the same bytes;
* every output is valid for its provider (tool calls paired and ordered);
* reasoning blocks are identical to the input or removed whole (OpenAI Responses: a reply with
  reasoning is served whole, every item of it as given but for tags and placeholders, or not at all);
* tags never accumulate.
"""

from __future__ import annotations

import itertools
import re

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from session_replay import reasoning_blocks

from magic_context.store import db
from magic_context.tools.reduce import find_session, queue_drops
from magic_context.transform import pipeline, protocol
from magic_context.transform.protocol import CODECS
from magic_context.wire import arcs
from magic_context.wire import model as m

WORDS = st.sampled_from(["alpha", "beta", "fix", "the", "bug", "in", "parser", "§12§", "tests", "pass", "ok"])
TEXT = st.lists(WORDS, min_size=1, max_size=40).map(" ".join)
TOOL = st.tuples(st.sampled_from(["read", "bash", "edit", "grep", "ctx_reduce", "todowrite"]),
                 st.sampled_from(["a.py", "b.py", "src/c.py"]), st.lists(WORDS, min_size=1, max_size=400).map(" ".join))
STEP = st.tuples(st.booleans(), st.one_of(st.none(), TEXT), st.lists(TOOL, max_size=3))
TURN = st.tuples(TEXT, st.lists(STEP, min_size=1, max_size=3))
_ids = itertools.count()


def build(turns) -> list[m.Message]:
    """Canonical messages for a generated conversation (rendered fresh by each codec)."""
    out: list[m.Message] = []
    clock = 1_700_000_000_000
    for t, (user_text, steps) in enumerate(turns):
        clock += 60_000
        out.append(m.Message(f"u{t}", m.USER, [m.Block(m.TEXT, text=user_text, key="p0")], created_at=clock))
        for s, (think, text, tools) in enumerate(steps):
            clock += 1_000
            blocks = []
            if think:
                blocks.append(m.Block(m.REASONING, text=f"thinking {t}.{s}",
                                      meta={"signature": f"sig{t}{s}", "encrypted_content": f"enc{t}{s}"}))
            if text:
                blocks.append(m.Block(m.TEXT, text=text))
            calls = [(f"call_{t}_{s}_{k}", tool) for k, tool in enumerate(tools)]
            for call_id, (name, path, _) in calls:
                blocks.append(m.Block(m.TOOL_CALL, tool_id=call_id, tool_name=name, input={"path": path}))
            if not blocks:
                blocks.append(m.Block(m.TEXT, text="done"))
            out.append(m.Message(f"a{t}.{s}", m.ASSISTANT, blocks, created_at=clock, completed_at=clock + 500))
            for call_id, (name, _, output) in calls:
                out.append(m.Message(f"r{call_id}", m.TOOL, [m.Block(m.TOOL_RESULT, text=output, tool_id=call_id,
                                                                     tool_name=name)], created_at=clock + 600))
    return out


def requests(messages: list[m.Message]) -> list[int]:
    """Cut points: a request is the history before each assistant turn."""
    return [i for i, msg in enumerate(messages) if msg.role == m.ASSISTANT and i > 0]


def serve(shape: str, native: list, session: str, now: int, limit: int) -> tuple[list, dict]:
    doc = {"messages": native, "harness": shape, "session_id": session, "project_dir": "/tmp", "now": now,
           "model": {"provider": "p", "id": "model", "context_limit": limit}}
    result = pipeline.run(protocol.read_input(protocol.parse_document(orjson.dumps(doc)), {}))
    return orjson.loads(orjson.dumps(result.document["messages"])), result.report


TAG_STACK = re.compile(r"§\d+§\s*§\d+§")


def replies_kept_whole(given: list, served: list) -> bool:
    """Responses: every served reasoning item is followed by the rest of its reply, as given (type, call_id)."""
    def sig(item: dict) -> tuple:
        return item.get("type"), item.get("call_id")

    replies = {}  # bytes of a reasoning item -> (its offset in its reply, the reply's item signatures)
    for msg in CODECS[m.OPENAI_RESPONSES].decode(orjson.loads(orjson.dumps(given))):
        if msg.atomic:
            for offset, item in enumerate(msg.raw):
                if item.get("type") == "reasoning":
                    replies[orjson.dumps(item)] = (offset, [sig(x) for x in msg.raw])
    for at, item in enumerate(served):
        if item.get("type") == "reasoning":
            offset, reply = replies[orjson.dumps(item)]
            if [sig(x) for x in served[at - offset: at - offset + len(reply)]] != reply:
                return False
    return True


@pytest.mark.parametrize("shape", [m.ANTHROPIC, m.OPENAI, m.OPENCODE, m.PI, m.OPENAI_RESPONSES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(turns=st.lists(TURN, min_size=2, max_size=6), limit=st.sampled_from([1024, 2000, 6000]),
       gaps=st.lists(st.sampled_from([1_000, 30_000, 400_000]), min_size=30, max_size=30),
       reduce_at=st.lists(st.integers(0, 30), max_size=3))
def test_invariants_hold_on_every_pass(shape, turns, limit, gaps, reduce_at) -> None:
    canonical = build(turns)
    codec = CODECS[shape]
    session = f"prop-{shape}-{next(_ids)}"
    previous: list[bytes] | None = None
    now = 1_700_000_000_000
    for n, cut in enumerate(requests(canonical)):
        for msg in canonical:
            msg.raw = None
            for block in msg.blocks:
                block.raw = None
        native = codec.encode(build(turns)[:cut])
        given_reasoning = set(reasoning_blocks(shape, native))
        now += gaps[n % len(gaps)]
        out, report = serve(shape, orjson.loads(orjson.dumps(native)), session, now, limit)
        # Same request again: same bytes.
        repeat, repeat_report = serve(shape, orjson.loads(orjson.dumps(native)), session, now, limit)
        assert repeat == out, (report, repeat_report)
        encoded = [orjson.dumps(x) for x in out]
        if previous is not None and report["pass"] == "defer":
            assert encoded[: len(previous)] == previous, "defer pass changed bytes already served"
        previous = encoded
        decoded = codec.decode(orjson.loads(orjson.dumps(out)))
        assert arcs.validate_pairing(decoded, shape) == []
        if shape == m.ANTHROPIC:
            assert decoded[0].role == m.USER
        assert set(reasoning_blocks(shape, out)) <= given_reasoning
        if shape == m.OPENAI_RESPONSES:  # a reply tied to its reasoning keeps every item, calls included
            assert replies_kept_whole(native, out)
        for msg in decoded:  # the model's own echoes of tags never pile up in front of its text
            for block in msg.blocks:
                if msg.role == m.ASSISTANT and block.kind == m.TEXT:
                    assert not TAG_STACK.match(block.text), block.text[:80]
        if n in reduce_at:
            conn = db.open_db()
            try:
                pk = find_session(conn, session, shape)
                active = [r[0] for r in conn.execute(
                    "SELECT tag_number FROM tags WHERE session_pk = ? AND status = 'active' ORDER BY tag_number",
                    (pk,))]
                if len(active) > 25:
                    queue_drops(conn, pk, ",".join(map(str, active[:3])), protected_tags=20, now_ms=now)
            finally:
                conn.close()
