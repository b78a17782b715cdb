"""The knowledge layer through each real, pinned client: memories, notes, search and expand end to end.

One session per client, three client runs (the second and third continue the session the first made):

1. A memory is added with `mc memory add` for the project; the first run reads a file (one tool call) and gets
   a long answer. Its first request's m[0] shows the memory in `<project-memory>` (a new session's first render).
   The fake provider reports that answer's prompt at 81% of the window, as a provider would after a long
   stretch of work, so the next pass must fold (the historian's `force_80` rule) without the test sending
   80 000 tokens; the long answer outweighs the protected raw tail, so the first turn is what folds.
2. Between runs, a second memory (`mc memory add`) and a session note (`mc note add --session`) are made for
   the session id the client's own traffic created. The second run's first pass folds the first turn (the
   historian inline, extractive) and busts. m[0] changes only on a HARD fold, so it is unchanged; m[1] shows
   the new compartment and the new memory (`<new-memories>`, knowledge-layer.md §1.8). The publish is the
   deferred-notes trigger (§2.3); the run's tool call gives it a pass before the next user message (its tool
   result, a user-role message in Anthropic's format, is no new user message). In the `-no-tool-call` cases
   the run answers at once, so no pass sees the trigger before the third run.
3. The third run's new user message carries the deferred-notes nudge (a new user message mc first stored after
   the trigger, an active note), also when its pass is the first to see the trigger. Then `mc search --json`
   finds the file's identifier in the folded turn (a message or a compartment, with its ordinal range) and
   `mc expand --range` prints the tool output verbatim.

Pi and OpenCode state their own windows (their test modules' configs); Claude Code and Codex get theirs from
the `x-mc-context-limit` header, sent through each client's own custom-header setting.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_llm_server import ANTHROPIC, OPENAI, FakeLLMServer, RecordedRequest, Reply, ok, tool_call

from e2e import clients
from e2e import harness as h
from e2e import test_claude_code_e2e as claude_e2e
from e2e import test_codex_e2e as codex_e2e
from e2e import test_opencode_e2e as opencode_e2e
from e2e import test_pi_e2e as pi_e2e
from e2e.proxied import mc_proxy

pytestmark = pytest.mark.e2e

PROBE_FILE = "docs/quokka-migration.md"
PROBE_LINE = "FOLDED-PROBE: the quokka migration renames tbl_wombat_v7 to wombat_accounts (run migrate_quokka.sh)."
PROBE_QUERY = "tbl_wombat_v7"
MEMORY_BEFORE = "Run ./lint-frobnitz.sh before every commit."
MEMORY_DURING = "The staging database is called quokka_staging_db."
NOTE = "Check that wombat_accounts has an index on owner_id."
NUDGE = ('<instruction name="deferred_notes">You have 1 deferred note. '
         "Review with ctx_note read — some may be actionable now.</instruction>")
PROXY_WINDOW = 100_000  # the proxied clients' window for mc (x-mc-context-limit); Pi and OpenCode state their own
USAGE_SHARE = 0.81  # of the window: at or above the historian's 80% rule, below the 85% emergency band
FINAL = "Noted: FAKE-PROVIDER-FINAL-ANSWER"


def long_answer() -> str:
    """~13k tokens of hex rows: the first run's answer, longer than any window's protected raw tail here. No
    spaces in the rows: the fake streams one event per space-separated piece, so this is a handful of events."""
    import hashlib

    rows = ["|".join([f"{i:04d}", *(hashlib.sha1(f"{i}-{j}".encode()).hexdigest()[:8] for j in range(8))])
            for i in range(270)]
    return "Here is the table:\n" + "\n".join(rows) + "\n" + FINAL


def usage_at(request: RecordedRequest, tokens: int) -> dict[str, Any]:
    """A usage block in the request's wire format saying the prompt was `tokens` long."""
    if request.wire == ANTHROPIC:
        return {"input_tokens": tokens, "output_tokens": 50, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0}
    if request.wire == OPENAI:
        return {"prompt_tokens": tokens, "completion_tokens": 50, "total_tokens": tokens + 50}
    return {"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 50,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": tokens + 50}


@dataclass
class Client:
    """How the test drives one real client: its mc harness, its shell tool, and how to run and read it."""

    name: str  # clients.require(name)
    harness: str  # the harness mc files its sessions under
    window: int  # the context window mc is given for its model
    shell: Callable[[str], tuple[str, dict[str, Any]]]  # command → the model's tool call running it
    run: Callable[[str, bool], h.Run]  # (prompt, continue the last session) → the finished run
    session_id: Callable[[list[RecordedRequest]], str]  # the id the client's own traffic carries


def pi_client(stack: ExitStack, project: Path, env: dict[str, str], fake: FakeLLMServer) -> Client:
    pi_e2e.write_models(env, fake)
    h.setup("pi", project, env)

    def session_id(_requests: list[RecordedRequest]) -> str:
        found = [p.stem for p in Path(env["PI_CODING_AGENT_DIR"]).rglob("*.jsonl")]
        assert len(found) == 1, found  # Pi's own session file (named <timestamp>_<session id>.jsonl)
        return found[0].rsplit("_", 1)[-1]

    return Client("pi", "pi", pi_e2e.CONTEXT_LIMIT, lambda cmd: ("bash", {"command": cmd}),
                  lambda prompt, resume: pi_e2e.pi(project, env, "anthropic", prompt, *(["-c"] if resume else [])),
                  session_id)


def opencode_client(stack: ExitStack, project: Path, env: dict[str, str], fake: FakeLLMServer) -> Client:
    opencode_e2e.write_config(project, fake, "anthropic")
    h.setup("opencode", project, env)
    return Client("opencode", "opencode", opencode_e2e.CONTEXT_LIMIT,
                  lambda cmd: ("bash", {"command": cmd, "description": "Read the file"}),
                  lambda prompt, resume: opencode_e2e.opencode(project, env, *(["--continue"] if resume else []),
                                                               prompt),
                  lambda requests: h.main_requests(requests)[0].headers["x-session-affinity"])


def claude_client(stack: ExitStack, project: Path, env: dict[str, str], fake: FakeLLMServer) -> Client:
    proxy = stack.enter_context(mc_proxy(env, "--upstream-anthropic", fake.url))
    run_env = dict(claude_e2e.client_env(env, proxy.url),
                   ANTHROPIC_CUSTOM_HEADERS=f"x-mc-context-limit: {PROXY_WINDOW}")
    binary = str(clients.require("claude").path)

    def run(prompt: str, resume: bool) -> h.Run:
        argv = [binary, "-p", prompt, *(["--continue"] if resume else []), "--allowedTools", "Bash"]
        return h.run_client(argv, cwd=project, env=run_env, timeout=claude_e2e.CLIENT_TIMEOUT_S)

    return Client("claude", claude_e2e.HARNESS, PROXY_WINDOW,
                  lambda cmd: ("Bash", {"command": cmd, "description": "Read the file"}), run,
                  lambda requests: claude_e2e.session_of(h.main_requests(requests)[0]))


def codex_client(stack: ExitStack, project: Path, env: dict[str, str], fake: FakeLLMServer) -> Client:
    proxy = stack.enter_context(mc_proxy(env, "--upstream-openai", fake.openai_base_url))
    config = codex_e2e.user_config(f"{proxy.url}/v1").replace(
        'wire_api = "responses"\n', f'wire_api = "responses"\nhttp_headers = {{ "x-mc-context-limit" = '
                                    f'"{PROXY_WINDOW}" }}\n')
    Path(env["CODEX_HOME"], "config.toml").write_text(config)
    binary = str(clients.require("codex").path)

    def run(prompt: str, resume: bool) -> h.Run:
        argv = [binary, "exec", *(["resume", "--last"] if resume else []), "--skip-git-repo-check", prompt]
        return h.run_client(argv, cwd=project, env=dict(env, FAKE_API_KEY=codex_e2e.API_KEY),
                            timeout=codex_e2e.CLIENT_TIMEOUT_S)

    return Client("codex", codex_e2e.HARNESS, PROXY_WINDOW, lambda cmd: ("exec_command", {"cmd": cmd}), run,
                  lambda requests: h.main_requests(requests)[0].headers["session-id"])


CLIENTS = {"pi": pi_client, "opencode": opencode_client, "claude": claude_client, "codex": codex_client}


@contextmanager
def driven(name: str, project: Path, env: dict[str, str], fake: FakeLLMServer) -> Iterator[Client]:
    clients.require(name)
    with ExitStack() as stack:
        yield CLIENTS[name](stack, project, env, fake)


def first_run(client: Client) -> Callable[[RecordedRequest], Reply]:
    """Read the probe file once, then answer at length with a prompt reported at 81% of the window."""

    def answer(request: RecordedRequest) -> Reply:
        if not request.tool_names:  # a side call (a title): not part of the session
            return ok("Quokka migration")
        if request.tool_result_count == 0:
            return tool_call(*client.shell(f"cat {PROBE_FILE}"))
        return Reply(text=long_answer(), usage=usage_at(request, int(client.window * USAGE_SHARE)))

    return answer


def then_answer(call: tuple[str, dict[str, Any]]) -> Callable[[RecordedRequest], Reply]:
    """One tool call, then the final answer (side calls, offering no tools, get a short answer)."""
    made: list[RecordedRequest] = []

    def answer(request: RecordedRequest) -> Reply:
        if not request.tool_names:
            return ok("Side answer")
        made.append(request)
        return tool_call(*call) if len(made) == 1 else ok(FINAL)

    return answer


def mc_json(*args: str, env: dict[str, str]) -> Any:
    proc = h.mc(*args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["data"]


def user_blocks(request: RecordedRequest) -> list[list[str]]:
    """The text blocks of each user message, in order, whatever the wire format. mc's m[0] and m[1] are the first
    two blocks (a client may merge them and its first prompt into one message, as OpenCode's SDK does)."""
    body = request.body
    found = []
    for item in body.get("messages", body.get("input", [])):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            parts = content if isinstance(content, list) else [{"text": content or ""}]
            found.append([p.get("text", "") for p in parts if isinstance(p, dict) and "text" in p])
    return found


def head_of(request: RecordedRequest) -> tuple[str, str]:
    """mc's m[0] and m[1] texts."""
    blocks = [text for message in user_blocks(request) for text in message]
    return blocks[0], blocks[1]


def newest_user_text(request: RecordedRequest) -> str:
    return "".join(user_blocks(request)[-1])


def memory_block(text: str) -> str:
    start = text.find("<project-memory>")
    assert start >= 0, text[:3000]
    return text[start:text.index("</project-memory>", start)]


# The nudge on the first pass that sees the publish (no request in between) through two clients: each run is
# ~5 s there (Claude Code and Codex, through the proxy), twice that through Pi or OpenCode.
CASES = [pytest.param(name, True, id=name) for name in CLIENTS] + [
    pytest.param(name, False, id=f"{name}-no-tool-call") for name in ("claude", "codex")]


@pytest.mark.parametrize(("name", "tool_call_between"), CASES)
def test_knowledge_layer_reaches_the_client(name, tool_call_between, project, env, fake_provider):
    clients.require(name)
    (project / "docs").mkdir()
    (project / PROBE_FILE).write_text(PROBE_LINE + "\n")
    mc_json("memory", "add", MEMORY_BEFORE, "--category", "PROJECT_RULES", "--project", str(project), env=env)

    with driven(name, project, env, fake_provider) as client:
        # 1. A new session: its first render shows the project's memory in m[0].
        fake_provider.script([], default=first_run(client))
        run = client.run("STEP-1 Read docs/quokka-migration.md and tabulate the rows.", False)
        assert run.returncode == 0, run.explain()
        calls = h.main_requests(fake_provider.requests)
        assert len(calls) == 2, [(r.path, r.tool_names[:3]) for r in fake_provider.requests]
        assert PROBE_LINE in h.messages_text(calls[1]), "the tool did not run"
        head = head_of(calls[0])[0]
        assert head.startswith("<session-history>"), head[:300]
        assert f"<PROJECT_RULES>\n#1: {MEMORY_BEFORE}\n</PROJECT_RULES>" in memory_block(head)

        session_id = client.session_id(fake_provider.requests)  # what the client's own traffic (or files) name
        status = mc_json("status", "--latest", env=env)
        assert (status["session"]["harness"], status["session"]["session_id"]) == (client.harness, session_id)
        assert status["session"]["project_dir"] == str(project)
        assert status["context"]["limit_tokens"] == client.window  # the window the fold below is measured against
        assert status["compartments"] == []

        # 2. A memory and a note for that session; the next run's first pass folds the first turn and busts.
        # m[0] changes only on a HARD fold, so it stays as it was; m[1] shows what is new: the compartment and the
        # memory. The defer pass after the tool call replays both byte for byte.
        added = mc_json("memory", "add", MEMORY_DURING, "--category", "CONFIG_VALUES", "--project", str(project),
                        env=env)["memory"]
        mc_json("note", "add", NOTE, "--session", session_id, "--harness", client.harness, env=env)
        fake_provider.clear()
        fake_provider.script([], default=then_answer(client.shell("ls docs")) if tool_call_between else ok(FINAL))
        run = client.run("STEP-2 Now plan the migration.", True)
        assert run.returncode == 0, run.explain()
        calls = h.main_requests(fake_provider.requests)
        assert len(calls) == (2 if tool_call_between else 1), run.explain()
        m0, m1 = head_of(calls[0])
        assert m0 == head
        assert m1.startswith("<session-history-since>"), m1[:300]
        assert "<new-compartments>" in m1 and PROBE_FILE in m1, m1
        assert (f"<new-memories>\n<CONFIG_VALUES>\n#{added['id']}: {MEMORY_DURING}\n</CONFIG_VALUES>\n"
                "</new-memories>") in m1, m1
        assert PROBE_LINE not in h.messages_text(calls[0])  # folded away: no longer sent raw
        assert all(head_of(call) == (m0, m1) for call in calls[1:])
        status = mc_json("status", "--session", session_id, "--harness", client.harness, env=env)
        assert status["compartments"], status["passes"]
        assert status["historian"]["state"]["last_status"] == "published", status["historian"]
        assert not any("deferred_notes" in h.messages_text(call) for call in calls)  # no new user message yet

        # 3. A new user message after the publish: the deferred-notes nudge, a count and never the note's text.
        fake_provider.clear()
        fake_provider.script([], default=ok(FINAL))
        run = client.run("STEP-3 Go ahead.", True)
        assert run.returncode == 0, run.explain()
        calls = h.main_requests(fake_provider.requests)
        assert calls, run.explain()
        newest = newest_user_text(calls[0])
        assert "STEP-3 Go ahead." in newest and newest.endswith(NUDGE), newest[-600:]
        assert h.messages_text(calls[0]).count("deferred_notes") == 1  # there alone
        assert not any(NOTE in h.text_of(r) for r in fake_provider.requests)
        assert mc_json("status", "--latest", env=env)["session"]["session_id"] == session_id

    # The folded turn is one search away, and expand shows it verbatim.
    folded_end = max(c["end"] for c in status["compartments"])
    found = mc_json("search", PROBE_QUERY, "--session", session_id, "--harness", client.harness, env=env)
    hits = [r for r in found["results"] if r["source"] in ("message", "compartment")]
    assert hits, found
    hit = hits[0]
    assert hit["session_id"] == session_id
    assert 0 <= hit["ordinal_start"] <= hit["ordinal_end"] <= folded_end, (hit, folded_end)
    shown = h.mc("expand", "--session", session_id, "--harness", client.harness, "--range",
                 f"{hit['ordinal_start']}-{hit['ordinal_end']}", env=env)
    assert shown.returncode == 0, shown.stderr
    assert PROBE_LINE in shown.stdout, shown.stdout[:2000]

    # The memories this session's head shows are in that agent's context: the session's search hides them, a
    # person's project-wide search (no head) finds them.
    query = ["search", "lint-frobnitz", "--source", "memory"]
    assert mc_json(*query, "--session", session_id, "--harness", client.harness, env=env)["results"] == []
    found = mc_json(*query, "--project", str(project), env=env)["results"]
    assert [(r["source"], r["id"], r["snippet"]) for r in found] == [("memory", 1, MEMORY_BEFORE)], found
