"""`mc replay` bills mc's historian: a model provider's calls at the model's price (input uncached, output at
the output price), the extractive historian at 0 — and prices the same calls as a model would have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import SESSIONS
from fake_llm_server import FakeLLMServer, RecordedRequest

from magic_context.llm.base import Completion
from magic_context.llm.chain import call_tokens
from magic_context.replay import replay
from magic_context.replay.cost import PRICING

DJANGO = SESSIONS / "mini-swe-agent_deepseek-chat_django__django-13964.traj.json"
KEY_ENV = "MC_TEST_REPLAY_HISTORIAN_KEY"
_RANGE = re.compile(r'<new_messages first="(\d+)" last="(\d+)">')


def _answer(request: RecordedRequest) -> str:
    first, last = _RANGE.search(request.prompt).groups()
    return (f'<output><compartments><compartment start="{first}" end="{last}" title="Worked on the Django fix" '
            f'episode_type="debug" importance="60"><p1>U: fix the bug; edited django/db/models/base.py</p1>'
            f"<p2>Investigated and fixed.</p2><p3>Fixed.</p3><p4>django/db/models/base.py</p4></compartment>"
            f"</compartments><meta><unprocessed_from>{int(last) + 1}</unprocessed_from></meta></output>")


def _mc(data: dict) -> dict:
    return next(s for s in data["strategies"] if s["name"] == "mc")


def test_extractive_historian_costs_nothing_and_is_also_priced_as_a_model() -> None:
    data = replay(DJANGO, context_limit=40_000, strategies=["mc", "native"], user_config=False).to_dict()
    billing = _mc(data)["historian_billing"]
    assert billing["calls"] >= 3 and billing["providers"] == ["extractive"]
    assert billing["usd"] == 0 and "costs 0" in billing["note"]
    sonnet = PRICING["anthropic-sonnet"]
    expected = (billing["input_tokens"] * sonnet.input_per_mtok
                + billing["output_tokens"] * sonnet.output_per_mtok) / 1e6
    assert billing["model_priced_usd"] == pytest.approx(expected, abs=1e-6)
    assert billing["cost_with_model_historian_usd"] == pytest.approx(_mc(data)["cost_usd"] + expected, abs=1e-5)
    assert billing["cost_with_model_historian_vs_native"] > _mc(data)["cost_vs_native"]


def test_a_model_historian_is_billed_from_its_reported_usage(isolated_dirs: dict[str, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(KEY_ENV, "sk-test-replay-0123456789abcdef")
    with FakeLLMServer() as server:
        server.script([], default=_answer)
        isolated_dirs["config"].mkdir(parents=True)
        (isolated_dirs["config"] / "config.toml").write_text(
            f'[historian]\nprovider = "anthropic"\nfallback = ["extractive"]\n\n[historian.anthropic]\n'
            f'base_url = "{server.url}"\nmodel = "claude-opus-test"\napi_key_env = "{KEY_ENV}"\n', encoding="utf-8")
        data = replay(DJANGO, context_limit=40_000, strategies=["mc", "native"]).to_dict()
        requests = list(server.requests)
    billing = _mc(data)["historian_billing"]
    assert requests and billing["calls"] == len(requests) and billing["providers"] == ["anthropic"]
    assert "model's price" in billing["note"]
    # The fake server reports words as tokens; the replay bills exactly what it reported, at Opus prices
    # (the model id names Opus), all input uncached.
    opus = PRICING["anthropic-opus"]
    assert billing["usd"] == pytest.approx(
        (billing["input_tokens"] * opus.input_per_mtok + billing["output_tokens"] * opus.output_per_mtok) / 1e6)
    assert billing["usd"] > 0 and billing["input_tokens"] > billing["output_tokens"] > 0
    assert billing["prices"] == [{"model": "claude-opus-test", "pricing": "anthropic-opus", "label": opus.label,
                                  "assumed": False}]
    assert f"claude-opus-test at {opus.label}" in billing["note"] and "assumed" not in billing["note"]


def test_call_tokens_prefers_reported_usage_and_estimates_otherwise() -> None:
    anthropic = Completion("x" * 40, "anthropic", "m", {"input_tokens": 10, "cache_read_input_tokens": 90,
                                                        "output_tokens": 7}, 1)
    assert call_tokens("sys", "prompt", anthropic) == (100, 7, "provider")
    openai = Completion("x", "openai", "m", {"prompt_tokens": 55, "completion_tokens": 3}, 1)
    assert call_tokens("sys", "prompt", openai) == (55, 3, "provider")
    tokens_in, tokens_out, source = call_tokens("system " * 50, "prompt " * 100, Completion("answer " * 20, "c", "m",
                                                                                           None, 1))
    assert source == "estimate" and tokens_in > 100 and tokens_out > 10


def test_a_historian_model_the_price_table_does_not_know_is_priced_at_pricing_and_says_so(
        isolated_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (#13 acceptance): an Ollama model id was billed at the --pricing table without a word. The
    replay now names the table each historian model was priced at, flags an unknown model's as assumed (text
    and --json), and --pricing chooses it. Without a native run the text report no longer crashes."""
    import json

    from conftest import run_mc

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(KEY_ENV, "sk-test-replay-0123456789abcdef")
    with FakeLLMServer() as server:
        server.script([], default=_answer)
        isolated_dirs["config"].mkdir(parents=True)
        (isolated_dirs["config"] / "config.toml").write_text(
            f'[historian]\nprovider = "openai"\nfallback = ["extractive"]\n\n[historian.openai]\n'
            f'base_url = "{server.openai_base_url}"\nmodel = "llama3.1:8b"\napi_key_env = "{KEY_ENV}"\n',
            encoding="utf-8")
        runs = {}
        for pricing in ("anthropic-sonnet", "openai"):
            proc = run_mc("replay", str(DJANGO), "--context-limit", "40000", "--strategies", "mc",
                          "--pricing", pricing, "--json")
            assert proc.returncode == 0, proc.stderr.decode()
            runs[pricing] = _mc(json.loads(proc.stdout)["data"])["historian_billing"]
        text = run_mc("replay", str(DJANGO), "--context-limit", "40000", "--strategies", "mc",
                      env={"COLUMNS": "400"})
    for pricing, billing in runs.items():
        table = PRICING[pricing]
        assert billing["providers"] == ["openai"] and billing["calls"] > 0
        assert billing["prices"] == [{"model": "llama3.1:8b", "pricing": pricing, "label": table.label,
                                      "assumed": True}]
        assert f"llama3.1:8b at {table.label} — assumed: the price table does not know this model" in billing["note"]
        assert billing["usd"] == pytest.approx(
            (billing["input_tokens"] * table.input_per_mtok + billing["output_tokens"] * table.output_per_mtok) / 1e6,
            abs=1e-6)
    assert text.returncode == 0, text.stderr.decode()
    assert "llama3.1:8b at Claude Sonnet 4.5 — assumed" in " ".join(text.stdout.decode().split())

