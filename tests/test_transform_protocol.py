"""`transform.protocol`, `transform.hook`'s argv parser and `transform.flags` in process: every input field,
its default, its precedence and its exact error. The CLI tests (`test_transform_cli.py`) run the same contract
through a subprocess, which mutation testing cannot see; these pin it where a mutant would land."""

from __future__ import annotations

import io
import json
import os

import pytest

from magic_context.errors import BadInput, ExitCode
from magic_context.transform import flags, hook, protocol
from magic_context.wire import identity
from magic_context.wire import model as m

USER = {"role": "user", "content": "hello"}
NOW = 1_764_000_000_000


def read(document, **options):
    return protocol.read_input(document, {f"--{k.replace('_', '-')}": v for k, v in options.items()})


def bad(document, **options) -> BadInput:
    with pytest.raises(BadInput) as caught:
        read(document, **options)
    return caught.value


def fingerprint(project: str, text: str, mark: str | None = None) -> str:
    seed = f"{project}\x00{mark}\x00{text}" if mark else f"{project}\x00{text}"
    return "fp-" + identity.digest(seed.encode(), 8)


# parse_document


def test_parse_document_reads_one_json_document() -> None:
    assert protocol.parse_document(b' {"messages": []} ') == {"messages": []}


@pytest.mark.parametrize("data", [b"", b"  \n\t"])
def test_parse_document_names_empty_input(data: bytes) -> None:
    with pytest.raises(BadInput) as caught:
        protocol.parse_document(data)
    assert caught.value.message == "empty input on stdin"
    assert caught.value.fix == "pipe one JSON document (envelope, request body or message array)"


def test_parse_document_names_invalid_json() -> None:
    with pytest.raises(BadInput) as caught:
        protocol.parse_document(b"[1,")
    assert caught.value.message.startswith("stdin is not valid JSON: ")
    assert caught.value.fix == "pipe one JSON document"


def test_parse_document_names_too_deep_json() -> None:
    with pytest.raises(BadInput) as caught:
        protocol.parse_document(b"[" * (protocol.MAX_DEPTH + 5) + b"]" * (protocol.MAX_DEPTH + 5))
    assert caught.value.message.startswith(f"stdin nests JSON deeper than {protocol.MAX_DEPTH} levels (")
    assert caught.value.fix == "no harness sends this: check what produced the request"


# shapes


def test_a_bare_array_is_its_own_messages() -> None:
    inp = read([USER], project="/p", harness="pi")
    assert (inp.shape, inp.messages_json, inp.messages_key, inp.system_key) == ("array", [USER], "messages", "system")
    assert (inp.system, inp.usage, inp.tools, inp.agent) == (None, None, None, "primary")
    assert inp.session_id == fingerprint("/p", "hello")


def test_an_object_with_a_string_model_is_a_body_else_an_envelope() -> None:
    body = read({"model": "claude-x", "max_tokens": 5, "messages": [USER]}, project="/p")
    assert (body.shape, body.harness, body.model_key) == ("body", m.ANTHROPIC, "claude-x")
    envelope = read({"model": {"provider": "anthropic", "id": "claude-x"}, "messages": [USER], "harness": "pi"},
                    project="/p")
    assert (envelope.shape, envelope.model_key) == ("envelope", "anthropic/claude-x")
    assert read({"messages": [USER], "harness": "pi"}, project="/p").shape == "envelope"


def test_responses_input_list_and_string() -> None:
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    inp = read({"model": "gpt-5", "input": items, "instructions": "Be brief."}, project="/p")
    assert (inp.harness, inp.messages_key, inp.messages_json) == (m.OPENAI_RESPONSES, "input", items)
    assert (inp.system_key, inp.system) == ("instructions", "Be brief.")
    inp = read({"model": "gpt-5", "input": "just this"}, project="/p")
    assert (inp.messages_key, inp.messages_json) == ("input", [{"role": "user", "content": "just this"}])
    assert inp.session_id == fingerprint("/p", "just this")


def test_messages_win_over_a_responses_input() -> None:
    inp = read({"messages": [USER], "input": "other", "harness": "pi"}, project="/p")
    assert (inp.messages_key, inp.messages_json) == ("messages", [USER])


@pytest.mark.parametrize("document", [{"model": "x"}, {"messages": {"a": 1}}, {"input": 3}, {"messages": None}])
def test_an_object_without_messages_is_refused(document) -> None:
    assert bad(document).message == \
        "unknown shape: an object must carry a `messages` array (or a Responses `input`)"


@pytest.mark.parametrize(("document", "kind"), [(3, "int"), ("s", "str"), (None, "NoneType")])
def test_a_scalar_document_is_refused(document, kind: str) -> None:
    assert bad(document).message == f"expected a JSON object or array, got {kind}"


# harness


def test_harness_precedence_document_then_flag_then_detection() -> None:
    assert read({"messages": [USER], "harness": "openai"}, harness="pi", project="/p").harness == m.OPENAI
    assert read({"messages": [USER]}, harness="pi", project="/p").harness == m.PI
    assert read([USER], project="/p").harness == m.OPENAI  # detected: a plain chat array


def test_an_unknown_harness_flag_is_refused() -> None:
    assert bad([USER], harness="codex").message == \
        "--harness must be one of opencode, pi, anthropic, openai, openai-responses, got 'codex'"


def test_an_unknown_document_harness_is_refused() -> None:
    with pytest.raises(BadInput) as caught:
        protocol.read_input({"messages": [USER], "harness": "x" * 50}, {"--harness": "pi"})
    assert caught.value.message == f"unknown harness {'x' * 40!r}"
    assert caught.value.fix == "use one of opencode, pi, anthropic, openai, openai-responses"


# project, session


def test_project_precedence_document_then_flag_then_cwd() -> None:
    assert read({"messages": [USER], "project_dir": "/a/b/../c/"}, project="/f").project_dir == "/a/c"
    assert read({"messages": [USER]}, project="/f//g/").project_dir == "/f/g"
    assert read({"messages": [USER]}).project_dir == os.path.normpath(os.getcwd())
    assert protocol.read_input([USER], {"--project": True}).project_dir == os.path.normpath(os.getcwd())


def test_project_dir_must_be_a_string_without_nul() -> None:
    assert bad({"messages": [USER], "project_dir": 3}).message == "project_dir must be a string path, got number"
    assert bad({"messages": [USER], "project_dir": "a\x00b"}).message == \
        "project_dir contains a NUL byte, which no path can hold"
    assert bad([USER], project="a\x00b").message == "--project contains a NUL byte, which no path can hold"


def test_session_precedence_document_then_opencode_info_then_flag_then_fingerprint() -> None:
    opencode = [{"info": {"id": "m1", "sessionID": "ses_X", "role": "user"},
                 "parts": [{"type": "text", "text": "he"}, {"type": "text", "text": "llo"}]}]
    assert read({"messages": opencode, "session_id": "doc"}, session="flag", project="/p").session_id == "doc"
    assert read(opencode, session="flag", project="/p").session_id == "ses_X"
    assert read([USER], session="flag", project="/p").session_id == "flag"
    assert read([USER], project="/p").session_id == fingerprint("/p", "hello")
    no_id = [{"info": {"id": "m1", "role": "user"}, "parts": [{"type": "text", "text": "he"}, "junk",
                                                              {"type": "text", "text": 5},
                                                              {"type": "text", "text": "llo"}]}]
    assert read(no_id, project="/p").session_id == fingerprint("/p", "hello")


def test_the_fingerprint_reads_the_first_user_message() -> None:
    blocks = [{"role": "assistant", "content": "skip me"}, "junk",
              {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}, 7,
                                           {"type": "text", "text": "b"}]},
              {"role": "user", "content": "later"}]
    assert read(blocks, harness="anthropic", project="/p").session_id == fingerprint("/p", "ab")
    odd = [{"role": "user", "content": 5}, {"role": "user", "content": "second"}]
    assert read(odd, harness="anthropic", project="/p").session_id == fingerprint("/p", "second")
    assert read([], harness="pi", project="/p").session_id == fingerprint("/p", "")


def test_the_fingerprint_takes_the_bodys_conversation_mark() -> None:
    body = {"model": "claude-x", "messages": [USER], "prompt_cache_key": "thread", "metadata": {"user_id": "u"}}
    assert read(body, project="/p").session_id == fingerprint("/p", "hello", "thread")
    assert read(dict(body, prompt_cache_key=""), project="/p").session_id == fingerprint("/p", "hello", "u")
    assert read(dict(body, prompt_cache_key=3, metadata={"user_id": ""}), project="/p").session_id == \
        fingerprint("/p", "hello")
    assert read(dict(body, prompt_cache_key=None, metadata="u"), project="/p").session_id == \
        fingerprint("/p", "hello")


@pytest.mark.parametrize("value", ["", 3])
def test_a_bad_document_session_id_is_refused(value) -> None:
    assert bad({"messages": [USER], "session_id": value}, project="/p").message == \
        "session_id must be a non-empty string"


@pytest.mark.parametrize("value", ["", "a\x00b"])
def test_a_bad_session_flag_is_refused(value: str) -> None:
    assert bad([USER], session=value, project="/p").message == "--session must be a non-empty string without NUL bytes"


# model, limit


def test_model_from_an_envelope_object() -> None:
    def model(value, **options):
        inp = read({"messages": [USER], "harness": "pi", "model": value}, project="/p", **options)
        return inp.model_key, inp.context_limit

    assert model({"provider": "anthropic", "id": "claude-x", "context_limit": 200_000}) == \
        ("anthropic/claude-x", 200_000)
    assert model({"id": "claude-x"}) == ("claude-x", None)
    assert model({"provider": "anthropic"}) == (None, None)
    assert model({"provider": "", "id": ""}) == (None, None)
    assert model({"id": "claude-x", "context_limit": 100}, model="p/flag", context_limit="5000") == ("p/flag", 5000)
    assert model("a/string") == ("a/string", None)


@pytest.mark.parametrize(("value", "message"), [
    ({"provider": 3, "id": "x"}, "model.provider must be a string"),
    ({"provider": "p", "id": ["x"]}, "model.id must be a string"),
    ({"id": "x", "context_limit": True}, "model.context_limit must be an integer"),
    ({"id": "x", "context_limit": "100"}, "model.context_limit must be an integer"),
])
def test_a_bad_envelope_model_is_refused(value, message: str) -> None:
    assert bad({"messages": [USER], "harness": "pi", "model": value}, project="/p").message == message


def test_a_body_model_and_the_flags() -> None:
    inp = read({"model": "gpt-4o", "messages": [USER]}, project="/p")
    assert (inp.harness, inp.model_key, inp.context_limit) == (m.OPENAI, "gpt-4o", None)
    inp = read({"model": "gpt-4o", "messages": [USER]}, project="/p", model="openai/gpt-5", context_limit="64000")
    assert (inp.model_key, inp.context_limit) == ("openai/gpt-5", 64_000)
    assert read([USER], project="/p").model_key is None


# now, agent, usage, tools, system, switches


def test_now_from_an_envelope_only() -> None:
    assert read({"messages": [USER], "harness": "pi", "now": NOW}, project="/p").now_ms == NOW
    assert read({"messages": [USER], "harness": "pi", "now": 1.9}, project="/p").now_ms == 1
    assert read({"messages": [USER], "harness": "pi", "now": 0}, project="/p").now_ms == 0
    assert read({"messages": [USER], "harness": "pi", "now": protocol.MAX_NOW_MS}, project="/p").now_ms == \
        protocol.MAX_NOW_MS
    import time

    before = int(time.time() * 1000)
    body = read({"model": "claude-x", "messages": [USER], "now": 5}, project="/p")
    assert before <= body.now_ms <= int(time.time() * 1000)  # a body's `now` is not ours: the clock
    assert before <= read([USER], project="/p").now_ms <= int(time.time() * 1000)


@pytest.mark.parametrize(("value", "message"), [
    (True, "now must be epoch milliseconds (a number), got boolean"),
    ("1", "now must be epoch milliseconds (a number), got string"),
    (-1, "now must be epoch milliseconds between 0 and 253402300799999 (year 9999), got -1"),
    (protocol.MAX_NOW_MS + 1, "now must be epoch milliseconds between 0 and 253402300799999 (year 9999), "
                              "got 253402300800000"),
    (float("nan"), "now must be epoch milliseconds between 0 and 253402300799999 (year 9999), got nan"),
])
def test_a_bad_now_is_refused(value, message: str) -> None:
    assert bad({"messages": [USER], "harness": "pi", "now": value}, project="/p").message == message


def test_agent_from_an_envelope_only() -> None:
    assert read({"messages": [USER], "harness": "pi", "agent": "subagent"}, project="/p").agent == "subagent"
    assert read({"messages": [USER], "harness": "pi"}, project="/p").agent == "primary"
    assert read({"model": "claude-x", "messages": [USER], "agent": "subagent"}, project="/p").agent == "primary"
    assert bad({"messages": [USER], "harness": "pi", "agent": 1}, project="/p").message == \
        "agent must be a string: primary or subagent"


def test_usage_from_an_envelope_only() -> None:
    usage = {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 1}
    inp = read({"messages": [USER], "harness": "pi", "usage": usage}, project="/p")
    assert inp.usage == m.Usage(input_tokens=10, output_tokens=2, cache_read_input_tokens=7,
                                cache_creation_input_tokens=1)
    inp = read({"messages": [USER], "harness": "pi", "usage": {"input_tokens": 3, "output_tokens": None}},
               project="/p")
    assert inp.usage == m.Usage(input_tokens=3, output_tokens=0, cache_read_input_tokens=0,
                                cache_creation_input_tokens=0)
    assert read({"model": "claude-x", "messages": [USER], "usage": usage}, project="/p").usage is None
    assert read({"messages": [USER], "harness": "pi"}, project="/p").usage is None


@pytest.mark.parametrize(("value", "message"), [
    ([1], "usage must be an object with input_tokens, output_tokens, cache_* fields"),
    ({"input_tokens": -1}, "usage.input_tokens must be a non-negative integer"),
    ({"output_tokens": True}, "usage.output_tokens must be a non-negative integer"),
    ({"cache_read_input_tokens": 1.5}, "usage.cache_read_input_tokens must be a non-negative integer"),
    ({"cache_creation_input_tokens": "2"}, "usage.cache_creation_input_tokens must be a non-negative integer"),
])
def test_a_bad_usage_is_refused(value, message: str) -> None:
    assert bad({"messages": [USER], "harness": "pi", "usage": value}, project="/p").message == message


def test_tool_names_in_every_accepted_form() -> None:
    tools = ["plain", {"name": "anthropic_tool", "input_schema": {}},
             {"type": "function", "function": {"name": "openai_tool"}}, 7]
    names = read({"model": "claude-x", "messages": [USER], "tools": tools}, project="/p").tools
    assert names is not None and names[0] == "plain"
    assert {"plain", "anthropic_tool", "openai_tool"} <= set(names) and 7 not in names
    assert read({"model": "claude-x", "messages": [USER], "tools": []}, project="/p").tools == []
    assert read({"model": "claude-x", "messages": [USER]}, project="/p").tools is None
    assert bad({"model": "claude-x", "messages": [USER], "tools": {"a": 1}}, project="/p").message == \
        "tools must be an array of tool definitions"


def test_system_from_envelopes_and_bodies_not_arrays() -> None:
    assert read({"messages": [USER], "harness": "pi", "system": "S"}, project="/p").system == "S"
    assert read({"model": "claude-x", "messages": [USER], "system": [{"type": "text", "text": "S"}]},
                project="/p").system == [{"type": "text", "text": "S"}]
    envelope = read({"messages": [USER], "harness": "openai-responses", "instructions": "I", "system": "S"},
                    project="/p")
    assert (envelope.system_key, envelope.system) == ("instructions", "I")
    assert bad({"model": "gpt-5", "input": "x", "instructions": ["I"]}, project="/p").message == \
        "instructions must be a string, got array"
    assert read({"model": "gpt-5", "input": "x", "instructions": None}, project="/p").system is None


def test_report_and_dry_run_switches() -> None:
    inp = protocol.read_input([USER], {"--project": "/p", "--report": True, "--dry-run": False})
    assert (inp.report, inp.dry_run) == (True, False)
    inp = protocol.read_input([USER], {"--project": "/p", "--report": False, "--dry-run": True})
    assert (inp.report, inp.dry_run) == (False, True)
    inp = protocol.read_input([USER], {"--project": "/p"})
    assert (inp.report, inp.dry_run) == (False, False)


# reduce_available, build_output


@pytest.mark.parametrize(("enabled", "tools", "expected"), [
    (False, None, False), (False, ["ctx_reduce"], False), (True, None, True), (True, [], False),
    (True, ["ctx_reduce"], True), (True, ["mcp__mc__ctx_reduce"], True), (True, ["mc.ctx_reduce"], True),
    (True, ["read", "xctx_reduce"], False), (True, ["ctx_reduce_all"], False), (True, ["read", "ctx_reduce"], True),
])
def test_reduce_available(enabled: bool, tools, expected: bool) -> None:
    assert protocol.reduce_available(enabled, tools) is expected


def test_build_output_keeps_the_shape_and_unknown_fields() -> None:
    array = read([USER], project="/p", harness="pi")
    assert protocol.build_output(array, ["out"], "ignored") == ["out"]
    document = {"model": "claude-x", "messages": [USER], "system": "S", "extra": {"k": 1}}
    body = read(document, project="/p")
    assert protocol.build_output(body, ["out"], None) == {"model": "claude-x", "messages": ["out"], "system": "S",
                                                         "extra": {"k": 1}}
    assert protocol.build_output(body, ["out"], "S2") == {"model": "claude-x", "messages": ["out"], "system": "S2",
                                                         "extra": {"k": 1}}
    assert document == {"model": "claude-x", "messages": [USER], "system": "S", "extra": {"k": 1}}  # a copy
    responses = read({"model": "gpt-5", "input": "x", "instructions": "I"}, project="/p")
    assert protocol.build_output(responses, ["out"], "I2") == {"model": "gpt-5", "input": ["out"],
                                                              "instructions": "I2"}


# hook.parse_args, flags


def test_parse_args_defaults_are_the_switches_off() -> None:
    assert hook.parse_args([]) == {"--report": False, "--dry-run": False}


def test_parse_args_reads_values_both_ways_and_switches() -> None:
    options = hook.parse_args(["--harness", "pi", "--session=s=1", "--report", "--context-limit", "5000",
                               "--project", "--dry-run", "--model=", "--dry-run"])
    assert options == {"--harness": "pi", "--session": "s=1", "--report": True, "--dry-run": True,
                       "--context-limit": "5000", "--project": "--dry-run", "--model": ""}


@pytest.mark.parametrize(("args", "message"), [
    (["--harness"], "--harness needs a value"),
    (["--report", "--model"], "--model needs a value"),
    (["--bogus"], "unknown argument '--bogus'"),
    (["--report=1"], "unknown argument '--report=1'"),
    (["pi"], "unknown argument 'pi'"),
    (["--context-limit", "0"], "--context-limit must be a positive integer, got '0'"),
    (["--context-limit=-5"], "--context-limit must be a positive integer, got '-5'"),
    (["--context-limit", "1e5"], "--context-limit must be a positive integer, got '1e5'"),
])
def test_parse_args_refuses_with_the_usage(args: list[str], message: str) -> None:
    with pytest.raises(BadInput) as caught:
        hook.parse_args(args)
    assert (caught.value.message, caught.value.fix) == (message, flags.USAGE)


def test_the_flag_table_and_its_help() -> None:
    assert flags.VALUE_FLAGS == ("--harness", "--session", "--project", "--model", "--context-limit")
    assert flags.BOOL_FLAGS == ("--report", "--dry-run")
    assert flags.USAGE.startswith("usage: mc transform [--harness H] [--session ID] [--project DIR]")
    assert flags.USAGE.endswith("[--context-limit N] [--report] [--dry-run]")
    assert flags.help_for("--report") == "Print the pass report as one JSON line on stderr."
    assert flags.help_for("--harness") == flags.FLAGS["--harness"][1]


# hook.main in process


def test_main_writes_the_output_and_the_report(capsys) -> None:
    document = {"messages": [USER], "harness": "pi", "session_id": "s-main", "project_dir": "/tmp", "now": NOW}
    out = io.BytesIO()
    assert hook.main(["--report"], stdin=io.BytesIO(json.dumps(document).encode()), stdout=out) == ExitCode.OK
    assert json.loads(out.getvalue())["messages"][-1] == {"role": "user", "content": "§1§ hello"}
    report_lines = capsys.readouterr().err.splitlines()
    assert len(report_lines) == 1
    report = json.loads(report_lines[0])
    assert (report["pass"], report["raw_written"], report["new_tags"]) == ("fold", 1, 1)
    out = io.BytesIO()
    assert hook.main([], stdin=io.BytesIO(json.dumps(document).encode()), stdout=out) == ExitCode.OK
    assert out.getvalue() and capsys.readouterr().err == ""


def test_main_maps_bad_input_to_exit_2_and_writes_nothing(capsys) -> None:
    out = io.BytesIO()
    assert hook.main([], stdin=io.BytesIO(b"{"), stdout=out) == ExitCode.BAD_INPUT
    assert out.getvalue() == b""
    err = capsys.readouterr().err
    assert err.startswith("mc: error: stdin is not valid JSON: ") and err.endswith(" — pipe one JSON document\n")


# hook.serve_pass: the fallbacks


def _doc(session: str, now: int = NOW) -> bytes:
    return json.dumps({"messages": [USER, {"role": "assistant", "content": "hi"}, {"role": "user", "content": "go"}],
                       "harness": "anthropic", "session_id": session, "project_dir": "/tmp", "now": now}).encode()


def _fallbacks(session: str):
    from magic_context.store import db, sessions, state

    conn = db.open_db()
    try:
        found = sessions.lookup_session(conn, "anthropic", session)
        return None if found is None else state.load_state(conn, found[0]).get(hook.FALLBACKS_KEY)
    finally:
        conn.close()


def _crash_with(monkeypatch, exc: BaseException) -> None:
    from magic_context.transform import pass_serve

    def crash(*args, **kwargs):
        raise exc

    monkeypatch.setattr(pass_serve, "persist", crash)


def test_a_crashed_pass_serves_the_last_known_good_and_counts_it(monkeypatch, capsys) -> None:
    good = hook.serve_pass(_doc("lkg"), {})
    assert good.inp.session_id == "lkg" and good.prompt_ordinal == 2 and not good.report.get("lkg")
    capsys.readouterr()
    _crash_with(monkeypatch, RuntimeError("boom"))
    reason = "internal error (RuntimeError: boom)"
    served = hook.serve_pass(_doc("lkg"), {})
    assert served.report["lkg"] is True and served.report["warnings"] == [reason]
    assert served.output == good.output  # the stored decisions, replayed
    assert served.inp.session_id == "lkg" and served.prompt_ordinal is None
    assert capsys.readouterr().err == f"mc: warning: {reason}; served the last known good context\n"
    assert _fallbacks("lkg") == {"count": 1, "first_at": NOW, "last_at": NOW, "last_reason": reason,
                                 "served": "last known good"}
    hook.serve_pass(_doc("lkg", NOW + 5), {})
    assert _fallbacks("lkg") == {"count": 2, "first_at": NOW, "last_at": NOW + 5, "last_reason": reason,
                                 "served": "last known good"}


def test_with_nothing_stored_a_crashed_pass_serves_the_input_unchanged(monkeypatch, capsys) -> None:
    hook.serve_pass(_doc("other"), {})  # a database exists; this session has no row yet
    capsys.readouterr()
    _crash_with(monkeypatch, RuntimeError("boom"))
    data = _doc("fresh")
    served = hook.serve_pass(data, {})
    reason = "internal error (RuntimeError: boom)"
    assert served.output is data and served.inp is None and served.prompt_ordinal is None
    assert served.report == {"pass": "defer", "bust": False, "reason": "input served unchanged", "warnings": [reason]}
    assert capsys.readouterr().err == f"mc: warning: {reason}; served the input unchanged\n"
    assert _fallbacks("fresh") is None  # never creates a session


def test_storage_errors_fail_closed_unless_busy_or_configured(monkeypatch, isolated_dirs) -> None:
    from magic_context.errors import StorageBusy, StorageUnavailable

    hook.serve_pass(_doc("closed"), {})
    _crash_with(monkeypatch, StorageUnavailable("disk gone"))
    with pytest.raises(StorageUnavailable, match=r"^disk gone$"):
        hook.serve_pass(_doc("closed"), {})
    assert _fallbacks("closed") is None
    _crash_with(monkeypatch, StorageBusy("locked"))
    served = hook.serve_pass(_doc("closed"), {})
    assert served.report["lkg"] is True and served.report["warnings"] == ["locked"]
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "config.toml").write_text("fail_closed_blocking = false\n")
    _crash_with(monkeypatch, StorageUnavailable("disk gone", fix="check it"))
    served = hook.serve_pass(_doc("closed"), {})
    assert served.report["warnings"] == ["disk gone — check it"]
    assert _fallbacks("closed")["count"] == 2


@pytest.mark.parametrize("name", ["BadInput", "ContextEmergency", "SchemaTooNew", "UnsafeLocation"])
def test_errors_the_user_must_see_are_never_papered_over(monkeypatch, isolated_dirs, name: str) -> None:
    from magic_context import errors

    hook.serve_pass(_doc("fatal"), {})
    isolated_dirs["config"].mkdir(parents=True, exist_ok=True)
    (isolated_dirs["config"] / "config.toml").write_text("fail_closed_blocking = false\n")
    _crash_with(monkeypatch, getattr(errors, name)("refused"))
    with pytest.raises(getattr(errors, name), match=r"^refused$"):
        hook.serve_pass(_doc("fatal"), {})
    assert _fallbacks("fatal") is None


def test_main_maps_an_interrupt_to_its_exit_code(capsys) -> None:
    class Interrupting(io.BytesIO):
        def read(self, *args):
            raise KeyboardInterrupt

    out = io.BytesIO()
    assert hook.main(["--report"], stdin=Interrupting(), stdout=out) == ExitCode.INTERRUPTED == 130
    assert out.getvalue() == b"" and capsys.readouterr().err == "mc: interrupted\n"


def test_the_opencode_fingerprint_reads_the_first_user_message_only() -> None:
    assistant = {"info": {"id": "m0", "role": "assistant"}, "parts": [{"type": "text", "text": "A"}]}
    odd = {"info": "not an object", "parts": [{"type": "text", "text": "B"}]}
    user = {"info": {"id": "m1", "role": "user"}, "parts": [{"type": "text", "text": "U"}]}
    no_parts = {"info": {"id": "m2", "role": "user"}, "parts": "U2"}
    assert read([assistant, odd, no_parts, user], harness="opencode", project="/p").session_id == \
        fingerprint("/p", "U")


def test_a_non_string_user_id_is_no_conversation_mark() -> None:
    body = {"model": "claude-x", "messages": [USER], "metadata": {"user_id": 3}}
    assert read(body, project="/p").session_id == fingerprint("/p", "hello")


def test_only_opencode_messages_name_their_session() -> None:
    marked = [{"role": "user", "content": "hello", "info": {"sessionID": "S"}}]
    assert read(marked, harness="pi", project="/p").session_id == fingerprint("/p", "hello")


def test_a_responses_namespace_names_its_tools() -> None:
    tools = [{"type": "namespace", "name": "mcp", "tools": [{"type": "function", "name": "ctx_reduce"}]}]
    names = read({"model": "gpt-5", "input": "x", "tools": tools}, project="/p").tools
    assert names is not None and "mcp__ctx_reduce" in names
    assert protocol.reduce_available(True, names)


def test_a_lone_surrogate_in_the_first_user_text_still_fingerprints() -> None:
    """The stdlib reader (documents nested past orjson's limit) lets a lone surrogate through: it hashes as '?'."""
    inp = read([{"role": "user", "content": "a\ud800b"}], harness="pi", project="/p")
    assert inp.session_id == "fp-" + identity.digest(b"/p\x00a?b", 8)


def test_switch_valued_session_and_model_options_are_ignored() -> None:
    inp = protocol.read_input([USER], {"--project": "/p", "--session": True, "--model": True})
    assert (inp.session_id, inp.model_key) == (fingerprint("/p", "hello"), None)


def test_debug_prints_the_traceback_of_a_crashed_pass_and_only_then(monkeypatch, capsys) -> None:
    hook.serve_pass(_doc("debug"), {})
    _crash_with(monkeypatch, RuntimeError("boom"))
    assert hook.main([], debug=True, stdin=io.BytesIO(_doc("debug")), stdout=io.BytesIO()) == ExitCode.OK
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "RuntimeError: boom" in err
    assert err.endswith("mc: warning: internal error (RuntimeError: boom); served the last known good context\n")
    assert hook.main([], stdin=io.BytesIO(_doc("debug")), stdout=io.BytesIO()) == ExitCode.OK
    assert "Traceback" not in capsys.readouterr().err
    hook.serve(_doc("debug"), {})  # debug is off unless asked for
    assert "Traceback" not in capsys.readouterr().err


def test_a_config_that_cannot_be_read_fails_closed(monkeypatch) -> None:
    from magic_context.config import hot
    from magic_context.errors import StorageUnavailable

    hook.serve_pass(_doc("unreadable"), {})
    _crash_with(monkeypatch, StorageUnavailable("disk gone"))

    def broken(*args, **kwargs):
        raise OSError("config unreadable")

    monkeypatch.setattr(hot, "load_hot", broken)  # the pass itself read it before (its own import)
    with pytest.raises(StorageUnavailable):
        hook.serve_pass(_doc("unreadable"), {})


def test_the_report_line_is_compact_json_with_unicode_kept(capsys) -> None:
    def at(now: int, used: int) -> bytes:
        return json.dumps({"messages": [USER], "harness": "anthropic", "session_id": "report-line",
                           "project_dir": "/tmp", "now": now, "usage": {"input_tokens": used, "output_tokens": 1},
                           "model": {"provider": "anthropic", "id": "claude-x", "context_limit": 20_000}}).encode()

    assert hook.main([], stdin=io.BytesIO(at(NOW, 100)), stdout=io.BytesIO()) == ExitCode.OK
    capsys.readouterr()
    # 85%: the force band busts even with nothing to drop (below it such a pass is held: reclaim.worth_a_bust)
    assert hook.main(["--report"], stdin=io.BytesIO(at(NOW + 1000, 17_000)), stdout=io.BytesIO()) == ExitCode.OK
    line = capsys.readouterr().err
    assert line.endswith("}\n") and line.count("\n") == 1
    assert '"reason":"usage 85.0% ≥ threshold 50%"' in line and ", " not in line.replace("; ", "")


def test_the_smallest_context_limit_is_one() -> None:
    assert hook.parse_args(["--context-limit", "1"])["--context-limit"] == "1"


def test_the_last_known_good_report_is_the_replayed_pass_with_its_own_warnings_first(monkeypatch, capsys) -> None:
    messages = [USER, {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {}}]},
                {"role": "user", "content": "go on"}]
    data = json.dumps({"messages": messages, "harness": "anthropic", "session_id": "lkg-report", "project_dir": "/tmp",
                       "now": NOW}).encode()
    repaired = ("repaired the input's tool pairing: answered the unanswered tool call t1 with "
                "[Tool execution was interrupted]")
    assert hook.serve_pass(data, {}).report["warnings"] == [repaired]
    _crash_with(monkeypatch, RuntimeError("boom"))
    report = dict(hook.serve_pass(data, {}).report)
    report.pop("ms")
    assert report == {"pass": "defer", "bust": False, "reason": "defer: within threshold, cache warm",
                      "tokens_before": 28, "tokens_after": 67, "tags": 3, "dropped": 0, "pending_drops": 0,
                      "historian": "idle", "warnings": [repaired, "internal error (RuntimeError: boom)"],
                      "usage_tokens": 67, "usage_source": "estimate", "context_limit": 200_000,
                      "threshold_percent": 40.0, "new_drops": 0, "new_tags": 0, "raw_written": 0, "lkg": True}


def test_a_parsed_document_is_used_as_given() -> None:
    # a copy of USER: the pass edits a parsed document in place (serve_pass's contract), which would leak
    # "§1§ " into every later test that serves USER (mutmut orders the tests its own way)
    document = {"messages": [dict(USER)], "harness": "pi", "session_id": "given", "project_dir": "/tmp", "now": NOW}
    served = hook.serve_pass(b"not json: the caller parsed it already", {}, document=document)
    assert served.inp.session_id == "given" and json.loads(served.output)["messages"][-1]["content"] == "§1§ hello"


def test_a_fallback_with_no_database_creates_none(monkeypatch, capsys) -> None:
    from magic_context import paths
    from magic_context.transform import pipeline

    def crash(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(pipeline, "run", crash)
    data = _doc("nodb")
    served = hook.serve_pass(data, {})
    assert served.output is data and served.report["reason"] == "input served unchanged"
    assert not os.path.exists(paths.db_file())


def test_a_pass_served_unchanged_is_counted_for_its_session(monkeypatch, capsys) -> None:
    from magic_context.transform import pipeline

    hook.serve_pass(_doc("unchanged"), {})

    def crash(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(pipeline, "run", crash)  # the replay fails too
    data = _doc("unchanged", NOW + 7)
    assert hook.serve_pass(data, {}).output is data
    assert _fallbacks("unchanged") == {"count": 1, "first_at": NOW + 7, "last_at": NOW + 7,
                                       "last_reason": "internal error (RuntimeError: boom)",
                                       "served": "input unchanged"}
