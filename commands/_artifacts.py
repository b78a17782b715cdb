"""The man page (roff) and the bash completion, generated from the same walk of the command tree as the
README's command table (`commands._docs.walk`), so none of them can drift from the commands.

    python -m commands._docs --man DIR                 # writes DIR/mc.1  (man -l DIR/mc.1)
    python -m commands._docs --completion bash > mc.bash  # source it, or put it in bash-completion's dir

zsh reads the bash completion through `autoload -U bashcompinit && bashcompinit`.
"""

from __future__ import annotations

from typing import Any

from commands._docs import CommandDoc, FlagDoc, _flag
from magic_context import __version__
from magic_context.errors import ExitCode

TITLE = "keep an agent's long session inside its context window, cache intact"


# ---- man page ---------------------------------------------------------------------------------------------------

def _roff(text: str) -> str:
    """Text safe in a roff line: backslashes escaped, hyphens literal, non-ASCII as `\\[uXXXX]` (plain troff
    reads bytes), no line read as a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in text)
    return "\\&" + text if text.startswith((".", "'")) else text


def _prose(help_text: str) -> list[str]:
    """A command's help without its first line (the summary) and its Example(s) section."""
    lines = help_text.replace("\b\n", "").replace("\b", "").splitlines()[1:]
    out: list[str] = []
    for line in lines:
        if line.strip().rstrip(":").lower() in ("example", "examples"):
            break
        out.append(line.strip())
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return out


def _flag_item(flag: FlagDoc) -> list[str]:
    if flag.argument:
        head = f"\\fI{_roff(flag.names[0])}\\fR"
    else:
        head = ", ".join(f"\\fB{_roff(name)}\\fR" for name in flag.names)
        if flag.metavar:
            head += f" \\fI{_roff(flag.metavar)}\\fR"
    return [".TP", head, _roff(flag.help or "(no help)")]


def man_page(docs: list[CommandDoc], root: Any) -> str:
    """`mc.1`: NAME, SYNOPSIS, the global options, one subsection per command (synopsis, help, flags,
    examples), EXIT STATUS and FILES. Reproducible: no date, the version only."""
    out = [f'.TH MC 1 "" "mc {__version__}" "User Commands"', ".SH NAME", f"mc \\- {_roff(TITLE)}",
           ".SH SYNOPSIS", ".B mc", "[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
           ".SH DESCRIPTION", _roff((root.help or "").strip()),
           "Run \\fBmc COMMAND \\-\\-help\\fR for one command's help.", ".SH OPTIONS"]
    for param in root.params:
        if not getattr(param, "hidden", False) and param.name != "help":
            out.extend(_flag_item(_flag(param)))
    out.extend([".TP", "\\fB\\-h\\fR, \\fB\\-\\-help\\fR", "Show the help and exit.", ".SH COMMANDS"])
    for doc in docs:
        out.extend([f'.SS "{_roff(doc.name)}"', _roff(doc.summary), ".PP", ".nf", _roff(doc.synopsis()), ".fi"])
        prose = _prose(doc.help)
        if prose:
            out.append(".PP")
            out.extend(".PP" if not line else _roff(line) for line in prose)
        for flag in doc.flags:
            out.extend(_flag_item(flag))
        if doc.examples:
            out.extend([".PP", "Examples:", ".RS", ".nf", *(_roff(e) for e in doc.examples), ".fi", ".RE"])
    out.extend([
        ".SH EXIT STATUS", *(line for code in ExitCode for line in (".TP", f"\\fB{int(code)}\\fR",
                                                                     code.name.lower().replace("_", " "))),
        ".SH FILES", "The database and logs live under \\fI$MAGIC_CONTEXT_STORAGE_DIR\\fR, the config under "
        "\\fI$MAGIC_CONTEXT_CONFIG_DIR\\fR (their defaults: \\fBmc doctor\\fR prints them).",
        ".SH SEE ALSO", "The README of magic-context; \\fBmc doctor\\fR, \\fBmc status\\fR."])
    return "\n".join(out) + "\n"


# ---- bash completion --------------------------------------------------------------------------------------------

def _words(words: list[str]) -> str:
    return " ".join(sorted(set(words)))


def bash_completion(docs: list[CommandDoc], root: Any) -> str:
    """A bash completion function: the words so far pick the command (`memory list`), then its subcommands
    and flags complete; anything else (paths, values) falls back to bash's default completion."""
    children: dict[str, list[str]] = {"": []}
    for doc in docs:
        for depth in range(1, len(doc.path) + 1):
            parent, name = " ".join(doc.path[:depth - 1]), doc.path[depth - 1]
            children.setdefault(parent, [])
            if name not in children[parent]:
                children[parent].append(name)
    flags = {" ".join(doc.path): [n for f in doc.flags if not f.argument for n in f.names] + ["--help"]
             for doc in docs}
    root_flags = [n for p in root.params if not getattr(p, "hidden", False) for n in _flag(p).names]
    steps = " | ".join(f'"{parent} {name}"' for parent, names in children.items() for name in names)
    cases = [f'        "{path}") words="{_words(children.get(path, []) + flags.get(path, ["--help"]))}" ;;'
             for path in sorted(set(children) | set(flags)) if path]
    return "\n".join([
        f"# bash completion for mc {__version__}: generated by `python -m commands._docs --completion bash`",
        "_mc() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" path="" word words i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        word="${COMP_WORDS[i]}"',
        '        case "$path $word" in',
        f'            {steps}) path="${{path:+$path }}$word" ;;',
        "        esac",
        "    done",
        '    case "$path" in',
        f'        "") words="{_words(children[""] + root_flags + ["--help", "-h"])}" ;;',
        *cases,
        "    esac",
        '    COMPREPLY=($(compgen -W "$words" -- "$cur"))',
        "}",
        "complete -o default -F _mc mc magic-context",
    ]) + "\n"


__all__ = ["bash_completion", "man_page"]
