"""`mc proxy`: a resident local HTTP proxy at a client's base URL (Claude Code, Codex, any client).

Request bodies on the model routes (`/v1/messages`, `/v1/chat/completions`, `/v1/responses`) go
through the transform pass in process, then to the configured upstream; everything else passes
through. Responses stream back as they arrive, and the usage each response reports is recorded for
the session so the next pass schedules on provider-proven figures.

    settings   flags + the user config tier → ProxySettings
    routes     which paths are rewritten, the upstream URL, header filtering, session and project ids
    usage      the usage a response reports (SSE event streams and JSON bodies of the three wires)
    passes     the in-process pass: rewrite, fail open, or a context emergency; recording usage
    replies    provider-shaped error bodies
    app        the ASGI app (starlette) and upstream forwarding (httpx)
    lifecycle  binding, serving (uvicorn), the pid file, status, stop and the background mode
"""
