"""The command provider: any CLI that reads a prompt on stdin and prints the answer on stdout.

Examples: `["claude", "-p"]`, `["llm", "-m", "gpt-4o-mini"]`, `["opencode", "run"]`. Stdin is the system
prompt, a blank line, then the prompt. The process runs in its own process group so a timeout kills the
tool and anything it spawned.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from magic_context.llm.base import (
    Completion,
    ProviderCommandError,
    ProviderConfigError,
    ProviderEmpty,
    ProviderTimeout,
    elapsed_ms,
    one_line,
)

NAME = "command"
_REAP_TIMEOUT_S = 5.0


def stdin_text(system: str, prompt: str) -> str:
    """What the command reads: the system prompt, a blank line, then the prompt (just the prompt if no system)."""
    return f"{system}\n\n{prompt}" if system else prompt


class CommandProvider:
    """Runs `argv` once per request; `max_tokens` is ignored (the tool decides)."""

    name = NAME

    def __init__(self, *, argv: Sequence[str], timeout_s: float) -> None:
        self.argv = list(argv)
        self.timeout_s = timeout_s

    @classmethod
    def from_config(cls, historian: Any) -> CommandProvider:
        """Build from `historian.command` (its own `timeout_ms`, else `historian.timeout_ms`)."""
        section = historian.command
        timeout_ms = section.timeout_ms or historian.timeout_ms
        return cls(argv=section.argv, timeout_s=timeout_ms / 1000)

    @property
    def model(self) -> str:
        """The program's base name, which stands in for a model name in attempts and status."""
        return os.path.basename(self.argv[0]) if self.argv else ""

    def complete(self, system: str, prompt: str, *, max_tokens: int | None = None) -> Completion:
        """Run the command with the prompt on stdin; raises `ProviderError` on any failure."""
        if not self.argv:
            raise ProviderConfigError("historian.command.argv is empty", provider=NAME,
                                      fix='set historian.command.argv, e.g. ["claude", "-p"]')
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=os.name == "posix")
        except OSError as exc:
            raise ProviderCommandError(
                f"cannot run {self.model!r}: {exc.strerror or exc}", provider=NAME,
                fix="install it or change historian.command.argv") from exc
        data = stdin_text(system, prompt).encode("utf-8")
        try:
            out, err = proc.communicate(data, timeout=self.timeout_s)
        except subprocess.TimeoutExpired as exc:
            _kill_group(proc)
            raise ProviderTimeout(f"{self.model!r} gave no answer within {self.timeout_s:g}s; killed it",
                                  provider=NAME,
                                  fix="raise historian.command.timeout_ms or use a faster tool") from exc
        if proc.returncode != 0:
            raise ProviderCommandError(
                f"{self.model!r} exited with {_describe_exit(proc.returncode)}: {_first_line(err)}",
                provider=NAME)
        text = out.decode("utf-8", "replace")
        if not text.strip():
            raise ProviderEmpty(f"{self.model!r} printed nothing on stdout", provider=NAME)
        return Completion(text=text, provider=NAME, model=self.model, usage=None, ms=elapsed_ms(started))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the process group (POSIX) or the process, then reap it without hanging on inherited pipes."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=_REAP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        proc.wait(timeout=_REAP_TIMEOUT_S)


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"status {code}"


def _first_line(stderr: bytes) -> str:
    for line in stderr.decode("utf-8", "replace").splitlines():
        if line.strip():
            return one_line(line)
    return "(no stderr)"


__all__ = ["CommandProvider", "stdin_text"]
