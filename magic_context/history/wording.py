"""Sentence-level wording for the extractive historian: a request's gist, the assistant's closing words,
and the rules a person states plainly. Deterministic regex heuristics, tuned on real sessions by reading
the golden file (tests/golden/extractive_pi_large.md). Stdlib only.
"""

from __future__ import annotations

import re

from magic_context.history.chunk import clip

_FILLER = re.compile(r"^(?:(?:ok(?:ay)?|alright|so|hm+|yeah|yes|well|now|please|dude|my dude|omfg|wtf|actually|"
                     r"great|good|cool|nice|also|and|then|no|wait|i think|i believe|i guess|i suppose)[,.!]?\s+)+",
                     re.IGNORECASE)
_PROFANE = re.compile(r"(?i)\b(?:fuck\w*|shit\w*|damn\w*|crap\w*|wtf|omfg|stupid|idiot\w*|bloody|goddamn)\b")
_INTENSIFIER = re.compile(r"(?i)\b(?:fucking hell|fucking|fuckin|fuckoing|freaking|damn|bloody|goddamn|omfg|wtf)"
                          r"\b[,!]?\s*")
_TRIVIAL = {"continue", "go on", "go", "ok", "okay", "yes", "no", "y", "n", "sleep", "thanks", "thank you", "next"}
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSE = re.compile(r",\s+|;\s+|\s+-\s+")
_RULE_START = re.compile(r"^(?:please\s+)?(?:always|never|don'?t|do not|must not)\b", re.IGNORECASE)
_RULE_MODAL = re.compile(r"\b(?:must|should|shall)\s+(?:always|never|not)\b", re.IGNORECASE)
_USE_FOR = re.compile(r"^(?:please\s+)?(?:always\s+)?use\s+\S.{0,80}?\s+(?:for|instead of)\s+\S", re.IGNORECASE)
_PRONOUN_START = re.compile(r"^(?:that|this|it|which|there|you|we)\b", re.IGNORECASE)
_CHEER = re.compile(r"^(?:(?:perfect|great|excellent|good|done|ok(?:ay)?|nice|awesome|alright|all set|oops|"
                    r"got it|aha|fixed)(?: news)?(?:[!.,]\s*|$))+", re.IGNORECASE)
_LEAD_IN = re.compile(r"(?i)^(?:now\s+)?(?:let me|let's|i'll|i will|here's|here is|now i|so)\b")
_NEXT_STEP = re.compile(r"(?i)^(?:(?:now|next|then|first|so|ok(?:ay)?|alright|great|good|perfect)[,!.]?\s+)*"
                        r"(?:let me|let's|i'll|i will|i'm going to|i am going to|i need to|we need to|time to)\b")
_IDENTIFIER = re.compile(r"[\w-]+\.[a-z]{1,5}\b|[a-z]+[A-Z_]\w*|/")
_GOAL = re.compile(r"(?i)\b(?:need to|needs to|should|must|port|fix|add|create|implement|make|write|remove|delete|"
                   r"change|update|refactor|use|support|rename|release|adjust|modify)\b")
_PREPARE = re.compile(r"(?i)^(?:read|look|check|see|show|open|investigate|find|tell me|explain)\b")
_PASTED = re.compile(r"➜|git:\(|^\$ |^\+\d+ |^[-+] |^\s*at \S+ \(|^~?/\S*\s*(?:\(\w+\))?$|[├└│─]")
_ERROR_LINE = re.compile(r"\b(?:\w*Error|ENOENT|EACCES|Traceback)\b:?")
_IMAGE_PATH = re.compile(r"'(/[^']*\.(?:png|jpe?g|gif|webp))'|(?<!\S)/\S+\.(?:png|jpe?g|gif|webp)\b",
                         re.IGNORECASE)
_BOX = re.compile(r"[├└│┌┐┘┬┴┼]")
_DRAWING = re.compile(r"[\u2500-\u259f\u2800-\u28ff]")  # box drawing, block elements (bars), braille (spinners)
_SPINNER_START = re.compile(r"^\s*[\u2800-\u28ff]")  # "⠇ Working... (esc to interrupt)": a spinner's status line
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|(?<![\w\]])\[\d{1,3}(?:;\d{1,3})*m")
QUOTE_ERROR_SHARE = 1 / 3
"""At most this share of a clipped quote goes to the pasted error line it keeps (`quote`): the rest, the head, keeps
the person's opening words (a half share cut a 160-character quote's head to ~75 characters, past the opening of
one pasted request in pi_before, and retention of user instructions fell 67% → 66% at its 36k window)."""
QUOTE_ERROR_OPENING = 30
"""A head that already shows this many of the error line's first characters names the error (`quote`)."""
_TASK_TITLE = re.compile(r"<pr_description>\s*(?:Consider the following PR description:\s*)?([^\n]+)", re.I)
_MARKDOWN = re.compile(r"\*\*|__|^#+\s*|^\s*[-*]\s+|^\s*\d+[.)]\s+", re.MULTILINE)


def plain(text: str) -> str:
    """Text without markdown emphasis, headings or bullets, on one line."""
    return " ".join(_MARKDOWN.sub("", text).split())


def pasted(text: str) -> bool:
    """Mostly pasted material (a diff, a terminal session, a stack trace) rather than a request."""
    lines = [line for line in text.splitlines() if line.strip()]
    marked = sum(1 for line in lines if _PASTED.search(line.strip()) or line.lstrip().startswith(("+", "-", ">")))
    return len(lines) >= 3 and marked >= 0.3 * len(lines)


def trivial(text: str) -> bool:
    """A prompt that asks for nothing new: "continue", "ok", a slash command, one word."""
    words = _FILLER.sub("", text.strip()).strip(" .!?,").lower()
    if not words or words in _TRIVIAL or text.strip().startswith("/") or len(words.split()) < 2:
        return True
    return len(words.split()) <= 3 and not _GOAL.search(words) and not _IDENTIFIER.search(words)


def sentence_score(sentence: str) -> int:
    """How well a sentence names the work: goals up, preparation, questions and profanity down."""
    score = 2 if _GOAL.search(sentence) else 0
    score -= 2 if _PREPARE.match(sentence) else 0
    score -= 1 if sentence.rstrip().endswith("?") else 0
    score -= 3 if _PROFANE.search(sentence) else 0
    score -= 2 if sentence.lower().startswith("if ") else 0
    score -= 3 if _PASTED.search(sentence) else 0
    score += 1 if _ERROR_LINE.search(sentence) else 0
    return score


def gist(text: str, limit: int = 80) -> str:
    """The sentence of a request that best names the work, without filler, capitalized, within `limit`.

    Long sentences keep their leading clauses up to the limit (so a file named in the second clause
    survives); screenshots become `[image]`; a SWE-bench style `<pr_description>` yields its first line.
    """
    task = _TASK_TITLE.search(text)  # a SWE-bench style task (mini-swe-agent, SWE-agent): the title
    text = _IMAGE_PATH.sub("[image]", task.group(1) if task else text)
    sentences = [_FILLER.sub("", " ".join(x.split())).strip() for x in _SENTENCE.split(text)]
    sentences = [x for x in sentences if x and not trivial(x)] or [_FILLER.sub("", " ".join(text.split()))]
    best = max(sentences, key=sentence_score)  # max keeps the first of equals
    best = _INTENSIFIER.sub("", best).strip()
    if len(best) > limit:
        clauses = _CLAUSE.split(best)
        kept = clauses[0]
        for clause in clauses[1:]:
            if len(kept) + 2 + len(clause) > limit:
                break
            kept += ", " + clause
        best = kept if len(kept) >= 0.6 * limit else best
    best = clip(best.rstrip(" .,;:"), limit)
    return best[:1].upper() + best[1:]


def tidy(text: str) -> str:
    """Assistant prose on one line: no headings, no lead-in lines ("Summary:", "Let me …:"), no cheering."""
    kept: list[str] = []
    fenced = False
    for raw_line in text.splitlines():
        if raw_line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        line = plain(raw_line)
        if fenced or not line or raw_line.lstrip().startswith("#") or _BOX.search(line) \
                or (line.endswith(":") and len(line.split()) < 12):
            continue
        if kept and not kept[-1].endswith((".", "!", "?", ":", ";", ",")):
            kept[-1] += ";"  # list items and short lines read as a series
        kept.append(line)
    return _CHEER.sub("", " ".join(kept)).strip()


def finding(text: str) -> str:
    """Tidied assistant prose without the next step it announces at its end ("… Now let me fix it:", "Next,
    I'll run the tests."): what it found, before it turns to what it will do. Empty when it only announces."""
    sentences = [x for x in re.split(r"(?<=[.!?])\s+", text) if x.strip()]
    while sentences and (sentences[-1].rstrip().endswith(":") or _NEXT_STEP.match(sentences[-1])):
        sentences.pop()
    return " ".join(sentences)


def first_sentence(text: str, limit: int = 160) -> str:
    """The first sentence that says something (not a lead-in like "Let me …" or "Here's what I did")."""
    pieces = [x.strip() for x in re.split(r"(?<=[.!?])\s+|:\s+(?=[A-Z0-9`])", text) if x.strip()]
    good = [x for x in pieces if len(x.split()) >= 4 and not _LEAD_IN.match(x)]
    return clip(good[0], limit) if good else ""


def find_rules(text: str) -> list[str]:
    """Sentences (or clauses) in which a person states a rule plainly."""
    rules = []
    for piece in _SENTENCE.split(text):
        sentence = " ".join(piece.split()).strip()
        if not sentence or "?" in sentence or len(sentence) > 220:
            continue
        candidate = None
        body = _FILLER.sub("", sentence)
        if _RULE_START.match(body) or _USE_FOR.match(body):
            candidate = body
        elif _RULE_MODAL.search(body):
            clause = next((c for c in _CLAUSE.split(body) if _RULE_MODAL.search(c)), body)
            modal = _RULE_MODAL.search(clause)
            head = clause[: modal.start()] if modal else clause
            if " that " in head and len(clause[head.rindex(" that ") + 6:].split()) >= 5:
                clause = clause[head.rindex(" that ") + 6:]
            candidate = None if _PRONOUN_START.match(clause) else clause
        if candidate and len(candidate.split()) >= 3:
            candidate = candidate.rstrip(" .!,;")
            rules.append(candidate[:1].upper() + candidate[1:] + ".")
    return rules


def chrome(line: str) -> bool:
    """A line of terminal chrome rather than content: a rule, frame or progress bar (half or more of its visible
    characters are box-drawing, block or braille glyphs), or a spinner's status line ("⠇ Working...")."""
    visible = "".join(_ANSI.sub("", line).split())
    return bool(visible) and (len(_DRAWING.findall(visible)) >= 0.5 * len(visible) or bool(_SPINNER_START.match(line)))


def error_line(lines: list[str]) -> str | None:
    """The line of pasted output that states its error: the first that opens with one (`Error: …`,
    `ValueError: …`, so a Python traceback gives its exception, not `Traceback (most recent call last):`),
    else the first that names one (`_ERROR_LINE`) other than a traceback's header; None when none does."""
    named = [line.strip() for line in lines if _ERROR_LINE.search(line) and not line.lstrip().startswith("Traceback")]
    opening = (line for line in named if (hit := _ERROR_LINE.match(line)) and hit.group().endswith(":"))
    return next(opening, named[0] if named else None)


def quote(text: str, limit: int) -> str:
    """A person's message on one line within `limit` characters (+ `…`), for a summary's `U: "…"`.

    Screenshots become `[image]` and lines of terminal chrome (`chrome`) and ANSI codes are dropped (a message
    of nothing else is kept as it is); when the rest must be cut and the error line of output it pastes
    (`error_line`) would fall past the cut (the head does not show its opening), the quote is the head of the rest
    clipped shorter, then that line (itself within `QUOTE_ERROR_SHARE` of the limit), so a pasted crash is quoted
    by its error, not by the screen above it.
    """
    text = strip_images(text)
    lines = [clean for line in text.splitlines() if not chrome(line) and (clean := _ANSI.sub("", line)).strip()]
    flat = " ".join(" ".join(lines).split()) or " ".join(text.split())
    head = clip(flat, limit)
    error = error_line(lines) if len(flat) > limit else None
    if error is None or " ".join(error.split())[:QUOTE_ERROR_OPENING] in head:
        return head
    rest = lines.copy()
    rest.pop(next(i for i, line in enumerate(lines) if line.strip() == error))  # quoted once, after the head
    error = clip(" ".join(error.split()), int(limit * QUOTE_ERROR_SHARE))
    return f"{clip(' '.join(' '.join(rest).split()), limit - len(error) - 1)} {error}"


def strip_images(text: str) -> str:
    """Pasted screenshot paths become `[image]`."""
    return _IMAGE_PATH.sub("[image]", text)


__all__ = ["chrome", "error_line", "find_rules", "finding", "first_sentence", "gist", "pasted", "plain", "quote",
           "sentence_score", "strip_images", "tidy", "trivial"]
