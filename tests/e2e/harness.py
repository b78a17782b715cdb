"""Harness-neutral helpers for the end-to-end tests: install mc into a project with the real `mc setup`, run a
real client there, and check what the loopback fake provider received and what mc stored."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fake_llm_server import RecordedRequest

CACHE_MARK = re.compile(rb',"cache_control":\{"type":"ephemeral"(,"ttl":"[0-9a-z]+")?\}')
TAG = re.compile(r"§\d+§")
CLIENT_TIMEOUT_S = 180


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def explain(self) -> str:
        return f"exit {self.returncode} after {self.seconds:.1f}s\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n" \
               f"{self.stderr[-3000:]}"


def mc(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real mc CLI of this checkout, in the client's environment."""
    return subprocess.run([sys.executable, "-m", "magic_context", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


def setup(harness: str, project: Path, env: dict[str, str], *extra: str) -> dict[str, Any]:
    """`mc setup --harness H --project DIR --yes --json`; returns the result record (asserts success)."""
    proc = mc("setup", "--harness", harness, "--project", str(project), "--yes", "--json", *extra, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["data"]["results"][0]


def run_client(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = CLIENT_TIMEOUT_S) -> Run:
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, check=False)
    return Run(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


def main_requests(requests: list[RecordedRequest]) -> list[RecordedRequest]:
    """The agent's own LLM calls: those offering tools (a harness's side calls, such as titles, offer none)."""
    return [r for r in requests if r.tool_names]


def text_of(request: RecordedRequest) -> str:
    return request.raw.decode("utf-8")


def messages_text(request: RecordedRequest) -> str:
    """The conversation alone (no system prompt, no tool definitions), as JSON text."""
    body = request.body if isinstance(request.body, dict) else {}
    return json.dumps(body.get("messages", body.get("input")), ensure_ascii=False)


def first_user_text(request: RecordedRequest) -> str:
    """The text of the first message (m[0] when mc is in the loop), whatever the provider format."""
    messages = [m for m in request.body.get("messages", []) if m.get("role") not in ("system", "developer")]
    content = messages[0].get("content") if messages else ""
    if isinstance(content, list):
        return "".join(block.get("text", "") for block in content if isinstance(block, dict))
    return content or ""


def assert_mc_in_the_loop(request: RecordedRequest) -> None:
    """mc's head opens the conversation and parts carry §N§ tags."""
    assert first_user_text(request).startswith("<session-history>"), first_user_text(request)[:300]
    assert TAG.search(messages_text(request)), "no §N§ tag reached the provider"


def assert_mc_absent(request: RecordedRequest) -> None:
    text = messages_text(request)
    assert "<session-history>" not in text and not TAG.search(text), "mc's rewrite reached the provider"


def assert_prefix_kept(first: RecordedRequest, second: RecordedRequest) -> None:
    """`second` replays `first` byte for byte up to the end of its messages (the provider cache key), ignoring
    only where the client moved its own cache_control breakpoints; system and tools are unchanged too."""
    a, b = CACHE_MARK.sub(b"", first.raw), CACHE_MARK.sub(b"", second.raw)
    start = a.index(b'"messages":') + len(b'"messages":')
    _, end = json.JSONDecoder().raw_decode(a.decode("utf-8"), start)
    end_bytes = len(a.decode("utf-8")[:end].encode("utf-8"))
    head = a[:end_bytes - 1]  # everything before the closing bracket of the first request's messages
    assert b.startswith(head), _first_difference(head, b)
    body_a, body_b = json.loads(a), json.loads(b)
    for key in ("system", "tools"):
        assert body_a.get(key) == body_b.get(key), f"`{key}` changed between the two requests"


def _first_difference(a: bytes, b: bytes) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    window = slice(max(0, at - 150), at + 150)
    return f"requests differ at byte {at}:\n first: {a[window]!r}\nsecond: {b[window]!r}"


FAILING_MC = ("spawn-error", "crash", "hang")


def failing_mc_env(env: dict[str, str], kind: str, directory: Path) -> dict[str, str]:
    """`env` with the plugin's mc command replaced by one that fails as `kind` (a 1.5 s limit for "hang")."""
    from e2e.stubs import stub_mc

    command = "/nonexistent/bin/mc" if kind == "spawn-error" else str(stub_mc(directory, kind))
    return dict(env, MAGIC_CONTEXT_MC=command, MAGIC_CONTEXT_HOOK_TIMEOUT_MS="1500")


def assert_completed_on_its_own(run: Run, requests: list[RecordedRequest], final: str, tool_output: str) -> None:
    """With mc failing, the client still finished the one-tool turn with its own, untouched messages."""
    assert run.returncode == 0, run.explain()
    assert final in run.stdout, run.explain()
    calls = main_requests(requests)
    assert len(calls) == 2, [r.path for r in requests]
    for call in calls:
        assert_mc_absent(call)
    assert tool_output in messages_text(calls[1])


def status(session_id: str, harness: str, env: dict[str, str]) -> dict[str, Any]:
    proc = mc("status", "--session", session_id, "--harness", harness, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["data"]


def assert_session_stored(session_id: str, harness: str, env: dict[str, str], *, passes: int) -> dict[str, Any]:
    """mc's database holds the session under harness and id, with at least `passes` passes: the first a render."""
    data = status(session_id, harness, env)
    assert data["session"]["harness"] == harness
    assert data["session"]["session_id"] == session_id
    assert len(data["passes"]) >= passes, data["passes"]
    assert data["passes"][0]["reason"] == "first render"
    assert any(p["pass"] == "defer" and not p["bust"] for p in data["passes"][1:]), data["passes"]
    return data


__all__ = ["FAILING_MC", "Run", "assert_completed_on_its_own", "assert_mc_absent", "assert_mc_in_the_loop",
           "assert_prefix_kept", "assert_session_stored", "failing_mc_env", "main_requests", "mc", "messages_text",
           "run_client", "setup", "status", "text_of"]
