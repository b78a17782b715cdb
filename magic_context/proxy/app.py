"""The proxy's ASGI app (starlette) and its upstream forwarding (httpx).

Per request: read the body (size-limited); on a model route run the pass in a worker thread;
forward to the upstream with the client's own headers (auth untouched; hop-by-hop headers, Host
and mc's `x-mc-*` dropped; Content-Length recomputed); relay status, headers and body chunk by
chunk as they arrive. A model answer's usage is read on the side and recorded for the session
before the chunk that completes it reaches the client, so the client's next request (the next
pass) already sees it.
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route as StarletteRoute

from magic_context import log
from magic_context.proxy import passes, replies, routes
from magic_context.proxy import usage as usage_tap
from magic_context.proxy.settings import ProxySettings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from typing import Any

HEALTH_PATH = "/mc/health"
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]  # HEAD comes with GET


class ProxyState:
    """What the app shares between requests: settings, the upstream client, counters."""

    def __init__(self, settings: ProxySettings, info: dict[str, Any], *, debug: bool) -> None:
        self.settings = settings
        self.info = info
        self.debug = debug
        self.client: httpx.AsyncClient | None = None
        self.failures = passes.FailureLog()
        self.started = time.time()
        self.in_flight = 0
        self.counts = {"requests": 0, "rewritten": 0, "forwarded_unchanged": 0, "refused": 0, "upstream_errors": 0,
                       "usage_recorded": 0}

    def health(self) -> dict[str, Any]:
        return {**self.info, "status": "ok", "uptime_s": round(time.time() - self.started, 1),
                "in_flight": self.in_flight, "counts": dict(self.counts)}


def _upstream_client(settings: ProxySettings) -> httpx.AsyncClient:
    timeout = httpx.Timeout(settings.read_timeout_s, connect=settings.connect_timeout_s)
    client = httpx.AsyncClient(timeout=timeout, follow_redirects=False)
    for name in ("accept", "user-agent"):  # send only what the client sent
        client.headers.pop(name, None)
    return client


def create_app(settings: ProxySettings, info: dict[str, Any], *, on_ready: Callable[[], None] | None = None,
               debug: bool = False) -> Starlette:
    """The app; `info` (address, pid, upstreams…) is served by the health endpoint; `on_ready` runs at start-up."""
    state = ProxyState(settings, info, debug=debug)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        from magic_context.store import db

        # Held open for the server's lifetime, unused: a pass closing its own connection is then never the
        # last one, and SQLite checkpoints and resets the WAL when the last one closes (~5 ms per request);
        # the WAL checkpoints itself past wal_autocheckpoint instead.
        keeper = db.open_db()
        state.client = _upstream_client(settings)
        try:
            if on_ready is not None:
                on_ready()
            yield
        finally:
            await state.client.aclose()
            keeper.close()

    async def health(_request: Request) -> Response:
        return JSONResponse(state.health())

    async def handle(request: Request) -> Response:
        state.counts["requests"] += 1
        state.in_flight += 1
        try:
            return await _forward(state, request)
        finally:
            state.in_flight -= 1  # a relayed answer counts itself while it streams

    app = Starlette(routes=[StarletteRoute(HEALTH_PATH, health, methods=["GET"]),
                            StarletteRoute("/{path:path}", handle, methods=METHODS)], lifespan=lifespan)
    app.state.proxy = state
    return app


async def _read_body(request: Request, limit: int) -> bytes | None:
    """The request body, or None when it exceeds `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def _error(wire: str, status: int, message: str, code: str | None = None) -> Response:
    return Response(replies.error_body(wire, status, message, code=code), status_code=status,
                    media_type="application/json")


def _raw_headers(pairs: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in pairs]


async def _forward(state: ProxyState, request: Request) -> Response:
    settings, path = state.settings, request.url.path
    for secret in routes.secrets(request.headers):
        log.register_secret(secret)
    route = routes.model_route(request.method, path)
    upstream = routes.upstream_for(path, request.headers, route)
    wire = route.wire if route is not None else (routes.ANTHROPIC if upstream == "anthropic" else routes.CHAT)
    body = await _read_body(request, settings.max_body_bytes)
    if body is None:
        state.counts["refused"] += 1
        return _error(wire, 413, f"mc proxy: request body larger than {settings.max_body_bytes // (1024 * 1024)} MiB "
                      "(proxy.max_body_mb in your mc config)")
    outcome = None
    if route is not None and body:
        outcome = await run_in_threadpool(passes.transform, body, route, request.headers, path=path,
                                          default_project=settings.project_dir, failures=state.failures,
                                          debug=state.debug)
        if outcome.emergency is not None:
            state.counts["refused"] += 1
            return _error(wire, 400, replies.emergency_message(outcome.emergency), code="context_length_exceeded")
        body = outcome.body
        state.counts["rewritten" if outcome.rewritten else "forwarded_unchanged"] += 1

    assert state.client is not None
    base = routes.upstream_override(request.headers) or settings.upstreams[upstream]
    url = routes.upstream_url(base, path, request.url.query)
    upstream_request = state.client.build_request(request.method, url, content=body,
                                                  headers=routes.forward_headers(request.headers.items()))
    try:
        answer = await state.client.send(upstream_request, stream=True)
    except httpx.TimeoutException as exc:
        state.counts["upstream_errors"] += 1
        log.warning(f"proxy: upstream {upstream} timed out on {path}: {type(exc).__name__}")
        return _error(wire, 504, f"mc proxy: the upstream ({base}) did not answer in time "
                      f"({type(exc).__name__}); proxy.connect_timeout_s / proxy.read_timeout_s in your mc config")
    except httpx.HTTPError as exc:
        state.counts["upstream_errors"] += 1
        log.warning(f"proxy: upstream {upstream} unreachable on {path}: {exc}")
        return _error(wire, 502, f"mc proxy: cannot reach the upstream ({base}): {exc}; "
                      "check --upstream-anthropic / --upstream-openai (or the client's x-mc-upstream header)")

    receipt = outcome.receipt if outcome is not None and answer.status_code == 200 else None
    kind = answer.headers.get("content-type", "")
    event_stream = kind.startswith("text/event-stream")
    headers = routes.response_headers(answer.headers.multi_items())
    if receipt is not None and route is not None and not event_stream \
            and answer.headers.get("content-encoding", "identity") == "identity":
        # A whole JSON answer: read it, record its usage, then answer (nothing to stream).
        try:
            raw = b"".join([chunk async for chunk in answer.aiter_raw()])
        finally:
            await answer.aclose()
        usage = usage_tap.from_json(route.wire, raw)
        if usage is not None:
            await _record(state, receipt, usage)
        response = Response(raw, status_code=answer.status_code)
        response.raw_headers = _raw_headers([*(h for h in headers if h[0].lower() != "content-length"),
                                             ("content-length", str(len(raw)))])
        return response

    tap = usage_tap.UsageTap(route.wire) if receipt is not None and route is not None and event_stream else None
    response = _Relayed(answer, _relay(state, answer, tap, receipt, wire if event_stream else None))
    response.raw_headers = _raw_headers(headers)
    return response


class _Relayed(StreamingResponse):
    """An upstream answer relayed as it arrives; the upstream response is closed however the relay ends
    (also when the client left before the first chunk, so the body iterator never started)."""

    def __init__(self, answer: httpx.Response, chunks: AsyncIterator[bytes]) -> None:
        super().__init__(chunks, status_code=answer.status_code)
        self.answer = answer

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.answer.aclose()


async def _relay(state: ProxyState, answer: httpx.Response, tap: usage_tap.UsageTap | None,
                 receipt: passes.Receipt | None, sse_wire: str | None) -> AsyncIterator[bytes]:
    """The upstream's body, chunk by chunk as it arrives; the usage is recorded before the chunk completing it."""
    state.in_flight += 1
    try:
        async for chunk in answer.aiter_raw():
            if tap is not None and receipt is not None and tap.feed(chunk):
                await _record(state, receipt, tap.usage)
                tap = None
            yield chunk
        if tap is not None and receipt is not None and tap.usage is not None:  # a stream without a final usage event
            await _record(state, receipt, tap.usage)
    except httpx.HTTPError as exc:  # the upstream broke off mid-answer: tell an event-stream client why
        state.counts["upstream_errors"] += 1
        log.warning(f"proxy: upstream stream broke off: {type(exc).__name__}: {exc}")
        if sse_wire is not None:
            yield replies.error_event(sse_wire, f"mc proxy: the upstream stream broke off ({type(exc).__name__})")
    finally:
        state.in_flight -= 1


async def _record(state: ProxyState, receipt: passes.Receipt, usage: Any) -> None:
    await run_in_threadpool(passes.record_usage, receipt, usage)
    state.counts["usage_recorded"] += 1


__all__ = ["HEALTH_PATH", "ProxyState", "create_app"]
