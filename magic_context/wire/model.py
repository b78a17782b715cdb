"""The canonical message model every stage of mc reads and writes (plain slotted records: hot path).

A codec decodes a harness's JSON into `Conversation` / `Message` / `Block` and keeps a
reference to the original JSON object in `raw` (an OpenAI Responses reply: the list of its
original items). Encoding edits those original objects in place, so fields mc does not
understand survive untouched: decode then encode without any change yields equal JSON.

Editing rules every codec honours when encoding:
* A block whose `text` differs from `original` is written back. If the new text ends with the
  original text (a tag prefix was added) only the prefix is inserted, into the first text
  sub-part; otherwise the whole text/output is replaced by the new text.
* Blocks removed from `Message.blocks` disappear from the output; blocks with `raw is None`
  are new and are rendered fresh. The same holds for messages in `Conversation.messages`.
* Reasoning blocks are never edited: a reasoning block is either kept verbatim or removed whole.

Skimmed messages: every codec's `decode(messages, skim=N)` gives the first N messages only their
id, digest, role and times, with no blocks (system messages and the harness's own compaction
messages are always decoded fully). The transform asks for that on the history it folded away on
the previous pass, which is never served again: decoding it whole is most of a long session's
per-pass cost. The raw store refuses to write a skimmed message (`store.raw.SkimmedChange`) and the
pass checks every skimmed message was folded, decoding fully otherwise, so a skim never changes
the output.
"""

from __future__ import annotations

from magic_context.records import Factory, record

TYPE_CHECKING = False  # `typing` costs ~5 ms to import: keep it off the transform hot path
if TYPE_CHECKING:
    from typing import Any, Final

# Block kinds.
TEXT: Final = "text"
REASONING: Final = "reasoning"
TOOL_CALL: Final = "tool_call"
TOOL_RESULT: Final = "tool_result"
MEDIA: Final = "media"
OPAQUE: Final = "opaque"
BLOCK_KINDS: Final = frozenset({TEXT, REASONING, TOOL_CALL, TOOL_RESULT, MEDIA, OPAQUE})

# Canonical roles. "tool" is a message carrying only tool results (OpenAI `role: "tool"`, Pi `toolResult`).
SYSTEM: Final = "system"
USER: Final = "user"
ASSISTANT: Final = "assistant"
TOOL: Final = "tool"
ROLES: Final = frozenset({SYSTEM, USER, ASSISTANT, TOOL})

# Harness formats.
OPENCODE: Final = "opencode"
PI: Final = "pi"
ANTHROPIC: Final = "anthropic"
OPENAI: Final = "openai"
OPENAI_RESPONSES: Final = "openai-responses"
HARNESSES: Final = (OPENCODE, PI, ANTHROPIC, OPENAI, OPENAI_RESPONSES)

# OpenAI Chat Completions reasoning fields (wire.openai decodes each into a REASONING block whose
# meta["field"] names it). The provider reads none of them as prompt: Chat Completions has no reasoning
# input, DeepSeek discards earlier rounds' `reasoning_content`, and OpenRouter hands `reasoning_details`
# to providers that drop earlier turns' thinking. They stay in the message (mc never edits them) but
# cost no prompt tokens (`in_prompt`).
CHAT_REASONING_FIELDS: Final = frozenset({"reasoning_content", "reasoning", "reasoning_details"})

# Marks for the harness's own compaction (later stages never summarize a summary).
COMPACTION_REQUEST: Final = "request"  # OpenCode user message holding a `compaction` part
# The harness's own summary (OpenCode summary:true, Pi compactionSummary, Claude Code isCompactSummary).
COMPACTION_SUMMARY: Final = "summary"
BRANCH_SUMMARY: Final = "branch_summary"  # Pi branchSummary


@record
class Usage:
    """Provider-reported token usage of one response."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    @property
    def total_input(self) -> int:
        """All prompt tokens the provider counted: uncached + cache read + cache write."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens


@record
class Block:
    """One part of a message.

    text        text / reasoning text; for TOOL_RESULT the output flattened to text (sub-parts joined by "\\n")
    original    the text as decoded (the encoder writes back only when `text != original`)
    tool_id     TOOL_CALL: its call id; TOOL_RESULT: the id of the call it answers
    tool_name   the tool's name (TOOL_CALL, and TOOL_RESULT where the format carries it or it can be paired)
    input       TOOL_CALL arguments as a parsed JSON value (OpenAI's JSON-string arguments are parsed)
    is_error    TOOL_RESULT: the tool failed
    media_type  MEDIA: mime type
    meta        opaque provider metadata (e.g. a reasoning signature); never edited
    synthetic   injected by the harness or by mc rather than typed by a person or the model
    key         stable identity of the part within its message (e.g. "p3", an OpenCode part id)
    raw         the original JSON object this block came from (codec-private); None for new blocks
    """

    kind: str
    text: str = ""
    original: str | None = None
    tool_id: str | None = None
    tool_name: str | None = None
    input: Any = None
    is_error: bool = False
    media_type: str | None = None
    meta: dict[str, Any] | None = None
    synthetic: bool = False
    key: str = ""
    raw: Any = None

    @property
    def changed(self) -> bool:
        return self.original is not None and self.text != self.original


@record
class Message:
    """One message in harness order.

    id          the harness's id where it has one, else a derived id stable across passes
    ordinal     position in the session's raw history (assigned by the raw store; decode sets the input index)
    compaction  None, or COMPACTION_REQUEST / COMPACTION_SUMMARY / BRANCH_SUMMARY for the harness's own compaction
    raw         the original JSON object (codec-private); None for messages mc creates
    digest      the content hash the raw store compares (`identity.content_hash(raw)`; Anthropic hashes
                the message without its moving cache_control marks), when the codec computed it
    atomic      the provider rejects this message partially (an OpenAI Responses reply whose items are tied
                to its reasoning): drops never remove one of its tool calls (the call stays, its result
                becomes a placeholder), so the message is served whole or not at all
    """

    id: str
    role: str
    blocks: list[Block] = Factory(factory=list)
    ordinal: int = 0
    created_at: int | None = None
    completed_at: int | None = None
    usage: Usage | None = None
    provider: str | None = None
    model: str | None = None
    compaction: str | None = None
    synthetic: bool = False
    raw: Any = None
    digest: str | None = None  # content hash of `raw`, when the codec already computed it (saves a rehash)
    atomic: bool = False

    def text(self) -> str:
        """Visible text of the message (text blocks joined by newlines)."""
        return "\n".join(b.text for b in self.blocks if b.kind == TEXT)


@record
class Conversation:
    """A decoded request: messages plus what travels beside them.

    harness  one of HARNESSES
    system   system prompt entries (Anthropic `system`, OpenAI system/developer messages stay in `messages`)
    tools    names of the tools the model will see, or None when the input carries no tool list
    raw      the original document (array or request body), edited in place by `encode`
    """

    harness: str
    messages: list[Message]
    system: list[str] | None = None
    tools: list[str] | None = None
    model: str | None = None
    raw: Any = None



MAX_EPOCH_MS: Final = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


def epoch_ms(value: Any) -> int | None:
    """A message time in epoch milliseconds, or None unless a number in [0, year 9999] (a time is metadata:
    one out of range is dropped rather than stored, where SQLite's 64-bit integers would overflow)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= MAX_EPOCH_MS:
        return int(value)
    return None


def obj(value: Any) -> dict[str, Any]:
    """`value` itself when it is a JSON object, else an empty one (lenient reads of optional fields)."""
    return value if isinstance(value, dict) else {}


def json_kind(value: Any) -> str:
    """JSON type name of a value, for error messages ("null", "boolean", "number", "string", …)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)


def joined_text(content: Any, where: str, bad: Any) -> str:
    """Text of a provider content value: the string, or its `{"type": "text"}` parts joined by newlines.

    `bad(where, what)` builds the codec's own BadInput for a malformed value.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad(f"{where}.content", f"expected a string or an array of blocks, got {json_kind(content)}")
    texts = []
    for k, part in enumerate(content):
        if not isinstance(part, dict):
            raise bad(f"{where}.content[{k}]", f"expected an object, got {json_kind(part)}")
        if part.get("type") == "text":
            if not isinstance(part.get("text"), str):
                raise bad(f"{where}.content[{k}].text", f"expected a string, got {json_kind(part.get('text'))}")
            texts.append(part["text"])
    return "\n".join(texts)


def set_text(container: dict, field: str, new: str, *, part_type: str = "text", keep_parts: bool = False) -> None:
    """Make `container[field]` (a string or an array of parts) read as `new`, written in place.

    Compares with what the field holds now, so writing twice is idempotent. A pure prefix (a tag) goes
    into the first `part_type` part (one is inserted when there is none). Otherwise the value becomes
    the string; with `keep_parts` (system prompts) a pure suffix goes onto the last text part, else the
    first text part takes the new text and the other text parts go, so cache_control and other parts stay.
    """
    value = container.get(field)
    if not isinstance(value, list):
        if value != new:
            container[field] = new
        return
    texts = [p for p in value if isinstance(p, dict) and p.get("type") == part_type and isinstance(p.get("text"), str)]
    current = "\n".join(p["text"] for p in texts)
    if new == current:
        return
    if new.endswith(current):
        if texts:
            texts[0]["text"] = new[: len(new) - len(current)] + texts[0]["text"]
        else:
            value.insert(0, {"type": part_type, "text": new})
    elif not keep_parts:
        container[field] = new
    elif new.startswith(current):
        texts[-1]["text"] += new[len(current):]
    else:
        texts[0]["text"] = new
        dropped = {id(p) for p in texts[1:]}
        value[:] = [p for p in value if id(p) not in dropped]


def set_system_texts(messages: list, found: list[tuple[int, dict]], texts: list[str], fresh: Any, *,
                     part_type: str = "text") -> list:
    """Set the i-th system message in `found` ((index, message) pairs of `messages`) to texts[i], in place.

    Texts beyond the existing system messages are appended (blank-line separated) to the last one; with
    none at all, `fresh(text)` is inserted at index 0. String or part content keeps its form (`set_text`).
    """
    if not found:
        if texts:
            messages.insert(0, fresh("\n\n".join(texts)))
        return messages
    wanted = list(texts[: len(found)])
    if len(texts) > len(found):
        wanted[-1] = "\n\n".join(texts[len(found) - 1:])
    for (_, message), new in zip(found, wanted, strict=False):
        set_text(message, "content", new, part_type=part_type, keep_parts=True)
    return messages


def in_prompt(block: Block) -> bool:
    """Whether the provider reads `block` as prompt tokens when the message is sent back (token estimates
    and the replay's counter skip the rest): every block but Chat Completions reasoning fields."""
    return block.kind != REASONING or not block.meta or block.meta.get("field") not in CHAT_REASONING_FIELDS


__all__ = [
    "ANTHROPIC",
    "ASSISTANT",
    "BLOCK_KINDS",
    "BRANCH_SUMMARY",
    "CHAT_REASONING_FIELDS",
    "COMPACTION_REQUEST",
    "COMPACTION_SUMMARY",
    "HARNESSES",
    "MEDIA",
    "OPAQUE",
    "OPENAI",
    "OPENAI_RESPONSES",
    "OPENCODE",
    "PI",
    "REASONING",
    "ROLES",
    "SYSTEM",
    "TEXT",
    "TOOL",
    "TOOL_CALL",
    "TOOL_RESULT",
    "USER",
    "Block",
    "Conversation",
    "Message",
    "Usage",
    "in_prompt",
    "joined_text",
    "json_kind",
    "obj",
    "set_system_texts",
    "set_text",
]
