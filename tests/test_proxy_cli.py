"""The real `mc proxy` command: start-up line, status, stop, graceful SIGTERM, background mode, secrets."""

from __future__ import annotations

import json
import signal
import threading
import time

import httpx
import pytest
from fake_llm_server import FakeLLMServer, Reply
from proxy_helpers import ANTHROPIC_HEADERS, anthropic_body, proxy_process, sse_events

from magic_context import paths
from magic_context.proxy import lifecycle

FIRST = [{"role": "user", "content": "run the tests"}]


@pytest.fixture
def fake():
    with FakeLLMServer() as server:
        yield server


def test_start_up_line_status_and_stop(fake, mc) -> None:
    with proxy_process("--upstream-anthropic", fake.url, "--upstream-openai", fake.url + "/v1") as proxy:
        line = proxy.started
        assert line["event"] == "listening" and line["host"] == "127.0.0.1" and line["port"] > 0
        assert line["address"] == f"http://127.0.0.1:{line['port']}" and line["pid"] == proxy.proc.pid
        assert line["upstreams"] == {"anthropic": fake.url, "openai": fake.url + "/v1"}
        fake.script([], default=Reply(text="ok"))
        httpx.post(proxy.url + "/v1/messages", content=json.dumps(anthropic_body(FIRST, stream=False)),
                   headers=ANTHROPIC_HEADERS, timeout=30)
        status = mc("proxy", "status", "--json")
        assert status.returncode == 0, status.stderr
        data = json.loads(status.stdout)["data"]
        assert data["running"] and data["responding"] and data["pid"] == proxy.proc.pid
        assert data["counts"]["requests"] == 1 and data["counts"]["rewritten"] == 1
        human = mc("proxy", "status")
        assert proxy.url in human.stdout.decode()
        stopped = mc("proxy", "stop", "--json")
        assert stopped.returncode == 0 and json.loads(stopped.stdout)["data"]["stopped"]
        assert proxy.proc.wait(10) == 0
    assert lifecycle.read_record() is None
    after = mc("proxy", "status", "--json")
    assert after.returncode == 1 and json.loads(after.stdout)["data"]["running"] is False


def test_sigterm_lets_an_in_flight_stream_finish(fake) -> None:
    fake.script([], default=Reply(text=" ".join(f"w{i}" for i in range(8)), event_delay_s=0.3))
    with proxy_process("--upstream-anthropic", fake.url) as proxy:
        received: list[bytes] = []
        first_chunk = threading.Event()

        def client() -> None:
            body = json.dumps(anthropic_body(FIRST))
            with httpx.stream("POST", proxy.url + "/v1/messages", content=body, headers=ANTHROPIC_HEADERS,
                              timeout=30) as resp:
                for chunk in resp.iter_raw():
                    received.append(chunk)
                    first_chunk.set()

        thread = threading.Thread(target=client)
        thread.start()
        assert first_chunk.wait(20)
        proxy.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        with pytest.raises(httpx.ConnectError):  # no new connections while it drains
            httpx.get(proxy.url + "/mc/health", timeout=2)
        thread.join(30)
        assert proxy.proc.wait(20) == 0
    events = sse_events(b"".join(received))
    assert events[-1][0] == "message_stop"  # the stream finished after SIGTERM
    assert sum(1 for name, _ in events if name == "content_block_delta") == 8
    assert lifecycle.read_record() is None


def test_daemon_mode_runs_in_the_background(fake, mc) -> None:
    started = mc("proxy", "--daemon", "--port", "0", "--upstream-anthropic", fake.url, timeout=60)
    assert started.returncode == 0, started.stderr
    line = json.loads(started.stdout.decode().splitlines()[0])
    try:
        assert line["event"] == "listening" and line["log_file"].endswith("proxy.log")
        assert lifecycle.alive(line["pid"])
        assert httpx.get(line["address"] + "/mc/health").json()["pid"] == line["pid"]
        again = mc("proxy", "--port", "0")
        assert again.returncode == 1 and "already running" in again.stderr.decode()
        shown = mc("proxy", "status", "--json")
        assert shown.returncode == 0, shown.stderr
        state = json.loads(shown.stdout)["data"]
        assert state["running"] and state["pid"] == line["pid"] and state["log_file"] == str(paths.log_path())
    finally:
        stopped = mc("proxy", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not lifecycle.alive(line["pid"])
    logged = paths.log_path().read_text()  # start and stop reach mc's own log, not only the daemon's output
    assert f"proxy: listening at {line['address']} (pid {line['pid']}" in logged
    assert f"proxy: stopped (pid {line['pid']})" in logged
    gone = mc("proxy", "status", "--json")
    assert gone.returncode == 1 and json.loads(gone.stdout)["data"]["running"] is False


def test_bad_flags_and_a_taken_port_are_one_line_errors(mc) -> None:
    bad = mc("proxy", "--upstream-openai", "ftp://example.com")
    assert bad.returncode == 2 and "--upstream-openai must be an http(s) URL" in bad.stderr.decode()
    holder = lifecycle.bind("127.0.0.1", 0)
    try:
        taken = mc("proxy", "--port", str(holder.getsockname()[1]))
    finally:
        holder.close()
    assert taken.returncode == 2 and "cannot listen on 127.0.0.1" in taken.stderr.decode()
    assert mc("proxy", "stop").returncode == 1


def test_project_config_cannot_redirect_the_proxy(fake, mc, tmp_path) -> None:
    user = paths.user_config_path()
    user.parent.mkdir(parents=True, exist_ok=True)
    user.write_text(f'[proxy]\nupstream_anthropic = "{fake.url}"\n')
    project = tmp_path / "repo"
    project.mkdir()
    (project / ".magic-context.toml").write_text('[proxy]\nupstream_anthropic = "http://attacker.invalid"\n')
    from magic_context.config.load import load_config

    loaded = load_config(project)
    assert loaded.config.proxy.upstream_anthropic == fake.url
    assert any(w.key == "proxy.upstream_anthropic" for w in loaded.warnings)  # stripped key by key


def test_client_auth_values_never_reach_log_database_or_status(fake, mc) -> None:
    # Opaque values (no `sk-` prefix the log's patterns would catch): only the proxy's registration redacts them.
    key = "q7Qm9xZ2pL4vN8rT1wY6eA3c"
    bearer = "tB5nK8sW2dF6hJ9mQ4rV7yZ1"
    headers = {"x-api-key": key, "authorization": f"Bearer {bearer}", "anthropic-version": "2023-06-01",
               "x-claude-code-session-id": "secret-session"}
    fake.script([], default=Reply(text="ok", usage={"input_tokens": 9_800, "output_tokens": 10}))
    with proxy_process("--upstream-anthropic", fake.url, "--upstream-openai", "http://127.0.0.1:9") as proxy:
        post = lambda body, path="/v1/messages", extra=None: httpx.post(  # noqa: E731
            proxy.url + path, content=body, headers={**headers, **(extra or {})}, timeout=30)
        limit = {"x-mc-context-limit": "10000"}
        assert post(json.dumps(anthropic_body(FIRST, stream=False)), extra=limit).status_code == 200
        follow = [*FIRST, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "again"}]
        refused = post(json.dumps(anthropic_body(follow)), extra=limit)  # emergency: mc's own error
        garbage = post(b'{"messages": [', extra={"x-claude-code-session-id": key})  # fail open, logged
        unreachable = post(b"{}", "/v1/chat/completions")  # upstream error, logged
        assert fake.requests[0].headers["x-api-key"] == key  # forwarded untouched
        status = mc("status", "--json", "--session", "secret-session")
        proxy_status = mc("proxy", "status", "--json")
    proxy_stderr = proxy.stderr.decode()  # read once the proxy stopped
    assert refused.status_code == 400 and garbage.status_code == 200 and unreachable.status_code == 502
    seen = [refused.text, unreachable.text, status.stdout.decode(), status.stderr.decode(),
            proxy_status.stdout.decode(), proxy_stderr]
    data_dir = paths.data_dir()
    for path in data_dir.rglob("*"):
        if path.is_file():
            seen.append(path.read_bytes().decode("utf-8", "replace"))
    log_text = paths.log_path().read_text()
    assert "transform failed for session [REDACTED]" in log_text  # the fail-open line was written, redacted
    for text in seen:
        assert key not in text and bearer not in text
