"""Test helpers for `mc proxy`: a real proxy (uvicorn on 127.0.0.1, in a thread or as the real CLI) in
front of the real fake upstream (`fake_llm_server`), request bodies, and an SSE reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import REPO

from magic_context.proxy import lifecycle
from magic_context.proxy.settings import ProxySettings
from magic_context.records import replace

SYSTEM = "You are a careful coding agent."


def settings_for(upstream: str, **overrides: Any) -> ProxySettings:
    base = ProxySettings(host="127.0.0.1", port=0, upstream_anthropic=upstream, upstream_openai=upstream,
                         max_body_bytes=32 * 1024 * 1024, connect_timeout_s=2.0, read_timeout_s=10.0,
                         shutdown_grace_s=10.0, project_dir=str(REPO))
    return replace(base, **overrides)


@contextmanager
def proxy_in_thread(settings: ProxySettings) -> Iterator[str]:
    """The proxy's real uvicorn server on a random loopback port, in a thread of this process; yields its URL."""
    sock = lifecycle.bind(settings.host, settings.port)
    ready = threading.Event()
    server, record = lifecycle.make_server(settings, sock, on_ready=lambda _record: ready.set())
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="mc-proxy")
    thread.start()
    try:
        if not ready.wait(15):
            raise RuntimeError("the proxy did not start")
        while not server.started:
            time.sleep(0.01)
        yield str(record["address"])
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@dataclass
class ProxyProcess:
    proc: subprocess.Popen[bytes]
    started: dict[str, Any]  # the start-up JSON line
    stderr: bytes = b""  # what the proxy wrote to stderr, once it stopped

    @property
    def url(self) -> str:
        return str(self.started["address"])


def mc_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


@contextmanager
def proxy_process(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Iterator[ProxyProcess]:
    """The real `mc proxy --port 0 ARGS` in a subprocess; yields once its start-up line was read.
    Its stderr is on the yielded object once the block ends (the proxy has stopped)."""
    proc = subprocess.Popen([sys.executable, "-m", "magic_context", "proxy", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or mc_env(), cwd=cwd or REPO)
    proxy = None
    try:
        line = proc.stdout.readline() if proc.stdout else b""
        if not line:
            raise RuntimeError(f"mc proxy did not start: {proc.stderr.read().decode() if proc.stderr else ''}")
        proxy = ProxyProcess(proc, json.loads(line))
        yield proxy
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proxy is not None and proc.stderr:
            proxy.stderr = proc.stderr.read()
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()


def anthropic_body(messages: list[dict[str, Any]], *, stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": SYSTEM, "messages": messages,
            "stream": stream, **extra}


def chat_body(messages: list[dict[str, Any]], *, stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4.1", "messages": [{"role": "system", "content": SYSTEM}, *messages], "stream": stream,
            **extra}


ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-api03-test-key-000000000000"}


def sse_events(raw: bytes) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) for every event of an SSE body ("[DONE]" stays a string)."""
    events = []
    for block in raw.decode().split("\n\n"):
        name, data = None, []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            text = "\n".join(data)
            events.append((name, text if text == "[DONE]" else json.loads(text)))
    return events


def anthropic_text(events: list[tuple[str | None, Any]]) -> str:
    return "".join(data["delta"].get("text", "") for name, data in events if name == "content_block_delta")


def pass_reports(session_id: str) -> list[dict[str, Any]]:
    """The stored pass reports of one session, oldest first."""
    from magic_context.store import db

    conn = db.open_db()
    try:
        rows = conn.execute("SELECT r.report_json FROM pass_reports r JOIN sessions s ON s.id = r.session_pk "
                            "WHERE s.session_id = ? ORDER BY r.id", (session_id,)).fetchall()
    finally:
        conn.close()
    return [json.loads(row[0]) for row in rows]


def session_ids() -> set[str]:
    from magic_context.store import db

    conn = db.open_db()
    try:
        return {row[0] for row in conn.execute("SELECT session_id FROM sessions")}
    finally:
        conn.close()
