"""What the installers of base-URL clients share (Claude Code, Codex): the proxy's address, the install
record, writing and undoing one edited config file, and the checks `mc doctor` runs.

These clients have no hook that sees the message array, so the install points their base URL at
`mc proxy` and tells the proxy, in `x-mc-*` request headers the client sends, where the client's
requests go on to (`x-mc-upstream`: the base URL it used before, when it had its own) and which
project it works in (`x-mc-project-dir`, for a project-scoped install). Nothing lands in the client's
config directory but the edit itself: the install record (`mc.json`: the proxy URL, the values the
edit replaced, the backup and the file's hash after the edit) lives in mc's data directory, so the
uninstall can restore the file byte for byte while it is unchanged, or take out only mc's values
(putting back the replaced ones) when the user edited it since.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from magic_context import __version__, paths
from magic_context.doctor.registry import Status as CheckStatus
from magic_context.integrations import base, files
from magic_context.integrations.base import Operation, Scope, SetupResult, Verification
from magic_context.integrations.files import Plan

HEALTH_PATH = "/mc/health"  # the proxy's health endpoint (magic_context.proxy.app.HEALTH_PATH)


def proxy_url() -> str:
    """Where the client should send its requests: the running managed proxy, else `proxy.host`/`proxy.port`."""
    from magic_context.config.load import load_config
    from magic_context.proxy import lifecycle

    record = lifecycle.running()
    if record is not None and record.get("address"):
        return str(record["address"]).rstrip("/")
    conf = load_config(None).config.proxy
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(conf.host, conf.host)
    return f"http://[{host}]:{conf.port}" if ":" in host else f"http://{host}:{conf.port}"


def record_dir(harness: str, config_path: Path) -> Path:
    """The install record's directory for one edited config file: `<data dir>/integrations/<harness>/<hash>/`."""
    key = hashlib.sha256(str(config_path.expanduser().resolve()).encode()).hexdigest()[:16]
    return paths.data_dir() / "integrations" / harness / key


def install(harness: str, scope: Scope, config_path: Path, *, proxy: str, render: Callable[[bytes | None], bytes],
            previous: dict[str, Any], dry_run: bool, notes: list[str]) -> SetupResult:
    """Write `render(current bytes)` to the config file (backed up) and the install record; idempotent.

    `previous` holds the values the edit replaced (kept from an earlier install's record on a re-run, so a
    second install never records mc's own values as the user's)."""
    result = SetupResult(harness, Operation.INSTALL, scope, dry_run, notes=list(notes))
    where = record_dir(harness, config_path)
    earlier = base.read_manifest(where) or {}
    before = files.read_bytes(config_path)
    after = render(before)
    created_dirs = earlier.get("created_dirs") if earlier else \
        [str(d) for d in base.missing_dirs([config_path.parent])]
    plan = Plan()
    plan.write(config_path, after, f"route {harness} through mc proxy at {proxy}")
    result.changes += files.apply(plan, dry_run=dry_run, label=harness)
    config_record = dict(earlier.get("config") or {})
    change = next((c for c in result.changes if c.path == str(config_path)), None)
    if not earlier:
        config_record = {"path": str(config_path), "created": before is None,
                         "backup": change.backup if change is not None else None}
    elif before is None or files.sha256(before) != config_record.get("sha256"):
        # Edited by the user since mc's last write: the first backup no longer holds their file.
        config_record.update(created=False, backup=None)
    config_record["sha256"] = files.sha256(after)
    record = {"harness": harness, "mc_version": __version__, "scope": scope.as_dict(), "proxy_url": proxy,
              "config": config_record, "previous": earlier.get("previous", previous), "created_dirs": created_dirs}
    plan = Plan()
    plan.write(where / base.MANIFEST, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode(),
               "install record (what to restore on --uninstall)")
    result.changes += files.apply(plan, dry_run=dry_run, label=harness)
    if not result.changed:
        result.notes.insert(0, f"already installed ({scope.describe()}); nothing changed")
    return result


def uninstall(harness: str, scope: Scope, config_path: Path, *, strip: Callable[[bytes, dict[str, Any]], bytes],
              dry_run: bool) -> SetupResult:
    """Undo `install`: restore the backup (or delete a created file) while the file is as mc left it, else
    `strip(current bytes, previous values)` takes out only mc's values."""
    result = SetupResult(harness, Operation.UNINSTALL, scope, dry_run)
    where = record_dir(harness, config_path)
    record = base.read_manifest(where)
    current = files.read_bytes(config_path)
    plan = Plan()
    previous = {**(record or {}).get("previous", {}), "proxy_url": (record or {}).get("proxy_url")}
    config = (record or {}).get("config") or {}
    if current is not None:
        if record is not None and files.sha256(current) == config.get("sha256"):
            backup = files.read_bytes(Path(config["backup"])) if config.get("backup") else None
            if config.get("created"):
                plan.delete(config_path, "created by the install")
            elif backup is not None:
                plan.write(config_path, backup, "restored from the backup taken at install")
            else:
                plan.write(config_path, strip(current, previous), "mc's values removed")
        else:
            if record is not None:
                result.notes.append(f"{config_path} changed since the install: removed only mc's values")
            plan.write(config_path, strip(current, previous), "mc's values removed")
    for directory in reversed((record or {}).get("created_dirs") or []):
        plan.rmdir(Path(directory), "created by the install (empty)")
    plan.delete(where / base.MANIFEST, "install record", backup=False)
    plan.rmdir(where)
    result.changes += files.apply(plan, dry_run=dry_run, label=f"{harness}-uninstall")
    if not result.changed:
        result.notes.insert(0, f"not installed ({scope.describe()}); nothing changed")
    return result


def proxy_problem(url: str, timeout_s: float = 2.0) -> str | None:
    """None when mc proxy answers at `url`, else what is wrong and how to fix it."""
    import httpx

    try:
        answer = httpx.get(url + HEALTH_PATH, timeout=timeout_s, trust_env=False)
        ok = answer.status_code == 200 and answer.json().get("status") == "ok"
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return f"mc proxy does not answer at {url} ({type(exc).__name__}): the client's requests fail; " \
               "start it with `mc proxy --daemon`"
    return None if ok else f"{url} answers, but not as mc proxy; check proxy.port in your mc config"


def verify(harness: str, label: str, scope: Scope, config_path: Path, *, routed: Callable[[bytes, str], str | None],
           binary: str | None, tested: tuple[str, ...]) -> Verification:
    """Installed (the record and the config still route the client to the proxy), the proxy reachable,
    the client a tested version. `routed(config bytes, proxy url)` returns a problem or None."""
    record = base.read_manifest(record_dir(harness, config_path))
    problems: list[str] = []
    if record is None:
        return base.verification(harness, scope, [f"no install record for {config_path}; "
                                                  f"rerun `mc setup --harness {harness}`"], [])
    url = str(record.get("proxy_url", ""))
    data = files.read_bytes(config_path)
    problem = f"{config_path} is missing" if data is None else routed(data, url)
    if problem:
        problems.append(f"{problem}; rerun `mc setup --harness {harness}`")
    problem = proxy_problem(url)
    if problem:
        problems.append(problem)
    warnings = base.version_warnings(label, binary, tested)
    verdict = base.verification(harness, scope, problems, warnings)
    if verdict.status == CheckStatus.OK:
        return Verification(harness, scope, CheckStatus.OK,
                            f"{scope.describe()}: routed through mc proxy at {url} (answering)")
    return verdict


__all__ = ["proxy_problem", "proxy_url", "record_dir", "uninstall", "verify"]
