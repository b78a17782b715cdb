"""Test helpers: render a recorded session into any harness shape and replay it pass by pass.

Every call of a recorded session is decoded with the session's own codec, stripped of the recorded
provider usage (it measured the original, unmanaged context) and rendered fresh into the target
shape, so one real session exercises all four codecs and the whole transform.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from magic_context import tokens
from magic_context.store.raw import message_tokens
from magic_context.transform.protocol import CODECS
from magic_context.wire import arcs
from magic_context.wire import model as m
from magic_context.wire.importers import load_session

REPO = Path(__file__).resolve().parents[1]


def _fresh(messages: list[m.Message]) -> list[m.Message]:
    for message in messages:
        message.raw = None
        message.usage = None
        for block in message.blocks:
            block.raw = None
            block.original = None
    return messages


def convert(native: list[Any], source: str, target: str) -> list[Any]:
    """Messages of harness format `source` rendered fresh in format `target` (recorded usage stripped)."""
    return CODECS[target].encode(_fresh(CODECS[source].decode(native)))


def render_calls(path: Path, shape: str) -> Iterator[tuple[list[Any], Any]]:
    """(native messages in `shape`, recorded call) for every LLM call of a recorded session."""
    session = load_session(path)
    for call in session.calls:
        native = orjson.loads(orjson.dumps(call.messages))
        if shape == session.harness:
            for message in native:  # same format: keep the bytes, only strip the recorded usage
                if isinstance(message, dict):
                    message.pop("usage", None)
                    if isinstance(message.get("info"), dict):
                        message["info"].pop("tokens", None)
            yield native, call
            continue
        yield convert(native, session.harness, shape), call


def served_tokens(shape: str, document: Any) -> int:
    messages = document["messages"] if isinstance(document, dict) else document
    decoded = CODECS[shape].decode(orjson.loads(orjson.dumps(messages)))
    total = sum(message_tokens(msg, tokens.estimate) for msg in decoded)
    if isinstance(document, dict) and isinstance(document.get("system"), str):
        total += tokens.estimate(document["system"])
    return total


def reasoning_blocks(shape: str, messages: list[Any]) -> list[bytes]:
    decoded = CODECS[shape].decode(orjson.loads(orjson.dumps(messages)))
    return [orjson.dumps(b.raw if b.raw is not None else b.meta, option=orjson.OPT_SORT_KEYS)
            for msg in decoded for b in msg.blocks if b.kind == m.REASONING]


@dataclass
class ReplayOutcome:
    passes: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    peak_served: int = 0
    problems: list[str] = field(default_factory=list)
    last_document: Any = None


def replay(path: Path, shape: str, limit: int, *, subprocess_mode: bool, env: dict[str, str] | None = None,
           session_id: str = "replay", max_problems: int = 5) -> ReplayOutcome:
    """Serve every call through mc transform and check the invariants the product promises."""
    outcome = ReplayOutcome()
    previous: list[bytes] | None = None
    for index, (native, call) in enumerate(render_calls(path, shape)):
        envelope = {"messages": native, "harness": shape, "session_id": session_id, "project_dir": str(REPO),
                    "model": {"provider": "test", "id": call.model or "model", "context_limit": limit},
                    "now": call.timestamp_ms or 1_700_000_000_000 + index * 1000}
        payload = orjson.dumps(envelope)
        if subprocess_mode:
            proc = subprocess.run([sys.executable, "-m", "magic_context", "transform", "--report"], input=payload,
                                  capture_output=True, env={**os.environ, **(env or {})}, check=False)
            if proc.returncode != 0:
                outcome.problems.append(f"pass {index}: exit {proc.returncode}: {proc.stderr.decode()[-300:]}")
                break
            document = orjson.loads(proc.stdout)
            report = json.loads(proc.stderr.decode().strip().splitlines()[-1])
        else:
            from magic_context.transform import pipeline, protocol

            result = pipeline.run(protocol.read_input(protocol.parse_document(payload), {}))
            document, report = result.document, result.report
            document = orjson.loads(orjson.dumps(document))
        outcome.passes += 1
        outcome.kinds[report["pass"]] = outcome.kinds.get(report["pass"], 0) + 1
        out_messages = document["messages"]
        served = served_tokens(shape, document)
        outcome.peak_served = max(outcome.peak_served, served)
        if served > limit:
            outcome.problems.append(f"pass {index}: served {served} > window {limit}")
        decoded = CODECS[shape].decode(orjson.loads(orjson.dumps(out_messages)))
        violations = arcs.validate_pairing(decoded, shape)
        if violations:  # recorded sessions hold a few aborted turns; mc must not add violations of its own
            given = arcs.validate_pairing(CODECS[shape].decode(orjson.loads(orjson.dumps(native))), shape)
            if len(violations) > len(given):
                outcome.problems.append(f"pass {index}: invalid output: {violations[:2]} (input had {len(given)})")
        if shape == m.ANTHROPIC and decoded and decoded[0].role != m.USER:
            outcome.problems.append(f"pass {index}: first message is {decoded[0].role}")
        served_reasoning = reasoning_blocks(shape, out_messages)
        if served_reasoning:
            given = set(reasoning_blocks(shape, native))
            edited = [b for b in served_reasoning if b not in given]
            if edited:
                outcome.problems.append(f"pass {index}: {len(edited)} reasoning blocks edited")
        current = [orjson.dumps(x) for x in out_messages]
        if previous is not None and report["pass"] == "defer" and current[:len(previous)] != previous:
            diverge = next(i for i, (a, b) in enumerate(zip(previous, current, strict=False)) if a != b) \
                if any(a != b for a, b in zip(previous, current, strict=False)) else len(current)
            outcome.problems.append(f"pass {index}: defer pass changed message {diverge} of the previous output")
        previous = current
        outcome.last_document = document
        if len(outcome.problems) >= max_problems:
            break
    return outcome


__all__ = ["ReplayOutcome", "reasoning_blocks", "render_calls", "replay", "served_tokens"]
