"""The fake provider's streaming paths (Anthropic, OpenAI Chat, OpenAI Responses): SSE framing, a scripted
tool round, and exact request bytes and headers — what the end-to-end and proxy tests rely on."""

from __future__ import annotations

import json

import httpx
import pytest
from fake_llm_server import FakeLLMServer, tool_round

TOOLS = {
    "anthropic": [{"name": "bash", "input_schema": {"type": "object"}}],
    "openai": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}],
    "responses": [{"type": "function", "name": "bash", "parameters": {"type": "object"}}],
}
PATHS = {"anthropic": "/v1/messages", "openai": "/v1/chat/completions", "responses": "/v1/responses"}
FOLLOW_UP = {
    "anthropic": {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x",
                                                             "content": "hi"}]}]},
    "openai": {"messages": [{"role": "tool", "tool_call_id": "x", "content": "hi"}]},
    "responses": {"input": [{"type": "function_call_output", "call_id": "x", "output": "hi"}]},
}


def events(response: httpx.Response) -> list[dict]:
    data = [line[len("data: "):] for line in response.text.splitlines() if line.startswith("data: ")]
    return [json.loads(d) for d in data if d != "[DONE]"]


def streamed_text(response: httpx.Response) -> str:
    """The answer's text as a client reassembles it from the deltas (one event per word)."""
    out = []
    for event in events(response):
        delta = event.get("delta")
        if isinstance(delta, dict):
            out.append(delta.get("text") or "")
        elif isinstance(delta, str) and event.get("type") == "response.output_text.delta":
            out.append(delta)
        for choice in event.get("choices") or []:
            out.append((choice.get("delta") or {}).get("content") or "")
    return "".join(out)


@pytest.mark.parametrize("wire", list(PATHS))
def test_streamed_tool_round(wire):
    with FakeLLMServer() as server:
        server.script([], default=tool_round("bash", {"command": "echo hi"}, "final words"))
        first = {"model": "m", "stream": True, "tools": TOOLS[wire],
                 **({"input": [{"role": "user", "content": "go"}]} if wire == "responses"
                    else {"messages": [{"role": "user", "content": "go"}]})}
        r1 = httpx.post(server.url + PATHS[wire], json=first, headers={"x-session-id": "s1"})
        r2 = httpx.post(server.url + PATHS[wire], json=dict(first, **FOLLOW_UP[wire]))
        assert r1.headers["content-type"] == "text/event-stream"
        text1, text2 = json.dumps(events(r1)), json.dumps(events(r2))
        assert "bash" in text1 and "echo hi" in text1 and "final words" not in text1
        assert streamed_text(r2) == "final words" and "echo hi" not in text2 and streamed_text(r1) == ""
        if wire == "anthropic":
            assert events(r1)[0]["type"] == "message_start" and events(r1)[-1]["type"] == "message_stop"
        if wire == "responses":
            assert events(r2)[-1]["type"] == "response.completed"
        recorded = server.requests
        assert recorded[0].headers["x-session-id"] == "s1"
        assert json.loads(recorded[0].raw) == first
        assert recorded[0].tool_names == ["bash"] and not recorded[0].has_tool_result
        assert recorded[1].has_tool_result
