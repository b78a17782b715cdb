"""Running the proxy: bind, serve (uvicorn), the pid file, status, stop, and the background mode.

One managed proxy per data directory: its record (`<data dir>/proxy.json`: pid, address,
upstreams, version) is written once it listens and removed when it stops. SIGTERM and SIGINT stop
it gracefully: no new connections, in-flight answers (streams included) finish, for up to
`proxy.shutdown_grace_s`; a second Ctrl-C forces. `--daemon` starts the same server as a detached
process whose output goes to `<data dir>/logs/proxy.log`. Start, stop and every warning (fail-opens,
upstream errors) go to mc's log (`magic_context.log`, redacted) in either mode.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from magic_context import __version__, log, paths
from magic_context.errors import BadInput, CheckFailed
from magic_context.results import Problem, Result, Status

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    import uvicorn

    from magic_context.proxy.settings import ProxySettings

BACKLOG = 2048
START_TIMEOUT_S = 30.0


def record_file() -> str:
    return os.path.join(paths.data_dir_str(), "proxy.json")


def background_log_file() -> str:
    return os.path.join(paths.data_dir_str(), "logs", "proxy.log")


def read_record() -> dict[str, Any] | None:
    try:
        with open(record_file(), encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("pid"), int) else None


def _write_record(record: dict[str, Any]) -> None:
    path = record_file()
    paths.ensure_private_dir(os.path.dirname(path))
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, paths.FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    os.replace(tmp, path)


def _remove_record(pid: int) -> None:
    record = read_record()
    if record is not None and record.get("pid") == pid:
        try:
            os.unlink(record_file())
        except OSError:
            pass


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True  # no procfs: trust the signal check


def running() -> dict[str, Any] | None:
    """The record of the live managed proxy, or None."""
    record = read_record()
    return record if record is not None and alive(record["pid"]) else None


def bind(host: str, port: int) -> socket.socket:
    """A listening socket; BadInput naming the address when it cannot be had.

    The protocol is named: asyncio turns Nagle's algorithm off only on sockets that say IPPROTO_TCP,
    and with it on, a response written in two parts waits for the client's delayed ACK (~40 ms).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise BadInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                       fix="choose another --port (0 picks a free one) or stop what holds it") from exc
    return sock


def _address(host: str, port: int) -> str:
    """A URL a local client can reach (a wildcard bind is reached on loopback)."""
    connect = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://[{connect}]:{port}" if ":" in connect else f"http://{connect}:{port}"


class _Stopped(Exception):
    """SIGTERM after uvicorn's graceful stop (it re-raises the signal it caught): a clean exit."""


def _stopped(_signum: int, _frame: Any) -> None:
    raise _Stopped()


def make_server(settings: ProxySettings, sock: socket.socket, *, on_ready: Callable[[dict[str, Any]], None],
                debug: bool = False) -> tuple[uvicorn.Server, dict[str, Any]]:
    """The uvicorn server for a listening socket, and the proxy's record (address, pid, upstreams…)."""
    import uvicorn

    from magic_context.proxy.app import create_app

    host, port = sock.getsockname()[:2]
    record = {"pid": os.getpid(), "address": _address(host, port), "host": host, "port": port,
              "upstreams": settings.upstreams, "mc_version": __version__, "started_at": int(time.time())}
    app = create_app(settings, record, on_ready=lambda: on_ready(record), debug=debug)
    config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False, server_header=False,
                            date_header=False, timeout_graceful_shutdown=int(settings.shutdown_grace_s))
    return uvicorn.Server(config), record


def serve(settings: ProxySettings, *, on_ready: Callable[[dict[str, Any]], None], debug: bool = False) -> None:
    """Serve until SIGTERM/SIGINT; `on_ready(record)` once listening. Refuses when a managed proxy runs."""
    current = running()
    if current is not None:
        raise CheckFailed(f"an mc proxy is already running at {current.get('address')} (pid {current['pid']})",
                          fix="`mc proxy stop` stops it; `mc proxy status` shows it")
    from magic_context.store import db

    db.open_db().close()  # migrate once up front; storage trouble stops the start (exit 3), not each request
    from magic_context.transform import pipeline  # noqa: F401  (loaded now rather than on the first request)

    sock = bind(settings.host, settings.port)

    def ready(record: dict[str, Any]) -> None:
        _write_record(record)
        log.info(f"proxy: listening at {record['address']} (pid {record['pid']}, mc {__version__}; upstreams "
                 f"anthropic {settings.upstream_anthropic}, openai {settings.upstream_openai})")
        on_ready(record)

    server, _record = make_server(settings, sock, on_ready=ready, debug=debug)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _stopped) if main_thread else None
    try:
        server.run(sockets=[sock])
    except _Stopped:
        pass
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        _remove_record(os.getpid())
        sock.close()
        log.info(f"proxy: stopped (pid {os.getpid()})")


def status(timeout_s: float = 2.0) -> Result:
    """Whether the managed proxy runs and what its health endpoint says (and where it logs); failed, with a
    coded problem (`not_running`, `not_responding`), unless it runs and answers."""
    files = {"record_file": record_file(), "log_file": paths.log_file(), "background_log_file": background_log_file()}
    record = read_record()
    if record is None:
        return _status_failed({"running": False, **files}, "not_running", "mc proxy is not running")
    if not alive(record["pid"]):
        return _status_failed({"running": False, "stale_record": record, **files}, "not_running",
                              "mc proxy is not running (its record was stale: the process is gone)")
    import httpx

    from magic_context.proxy.app import HEALTH_PATH

    try:
        answer = httpx.get(str(record["address"]) + HEALTH_PATH, timeout=timeout_s, trust_env=False)
        health = answer.json()
    except (httpx.HTTPError, ValueError) as exc:
        return _status_failed({"running": True, "responding": False, "error": str(exc), **record, **files},
                              "not_responding",
                              f"mc proxy (pid {record['pid']}) runs at {record['address']} but does not answer: {exc}")
    return Result("proxy status", {"running": True, "responding": True, **record, **health, **files})


def _status_failed(data: dict[str, Any], code: str, message: str) -> Result:
    fix = ("start it with `mc proxy` or `mc proxy --daemon`" if code == "not_running"
           else f"`mc proxy stop`, then start it again; see {data['log_file']}")
    return Result("proxy status", data, Status.FAILED, (Problem(code, message, fix),))


def stop(timeout_s: float) -> Result:
    """SIGTERM the managed proxy and wait for it to exit (in-flight answers finish first); failed, coded
    `not_running` or `stop_timeout`, when there was none or it is still running after `timeout_s`."""
    record = running()
    if record is None:
        return _stop_failed({"stopped": False, "reason": "no mc proxy is running"}, "not_running",
                            "start one with `mc proxy` or `mc proxy --daemon`")
    pid = int(record["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while alive(pid):
        if time.monotonic() > deadline:
            return _stop_failed({"stopped": False, "pid": pid,
                                 "reason": f"still running after {timeout_s:g}s (in-flight answers finishing)"},
                                "stop_timeout", "wait and run `mc proxy stop` again, or pass a longer --timeout")
        time.sleep(0.05)
    _remove_record(pid)
    return Result("proxy stop", {"stopped": True, "pid": pid, "address": record.get("address")})


def _stop_failed(data: dict[str, Any], code: str, fix: str) -> Result:
    return Result("proxy stop", data, Status.FAILED, (Problem(code, data["reason"], fix),))


def start_background(args: list[str]) -> dict[str, Any]:
    """Start `mc proxy ARGS` detached (output → the proxy log); its record once it listens."""
    current = running()
    if current is not None:
        raise CheckFailed(f"an mc proxy is already running at {current.get('address')} (pid {current['pid']})",
                          fix="`mc proxy stop` stops it")
    log_path = background_log_file()
    paths.ensure_private_dir(os.path.dirname(log_path))
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, paths.FILE_MODE)
    try:
        child = subprocess.Popen([sys.executable, "-m", "magic_context", "proxy", *args], stdin=subprocess.DEVNULL,
                                 stdout=fd, stderr=fd, start_new_session=True, close_fds=True)
    finally:
        os.close(fd)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        record = read_record()
        if record is not None and record.get("pid") == child.pid:
            return {**record, "log_file": log_path}
        if child.poll() is not None:
            raise CheckFailed(f"the background proxy exited with code {child.returncode}: {_tail(log_path)}",
                              fix=f"see {log_path}")
        time.sleep(0.05)
    child.terminate()
    raise CheckFailed(f"the background proxy did not start within {START_TIMEOUT_S:g}s", fix=f"see {log_path}")


def _tail(path: str, limit: int = 400) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return " ".join(fh.read().decode("utf-8", "replace").split())
    except OSError:
        return "(no log)"


__all__ = ["alive", "background_log_file", "bind", "make_server", "read_record", "record_file", "running", "serve",
           "start_background", "status", "stop"]
