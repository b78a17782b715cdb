"""Project memories and notes: the lifecycle engine the CLI commands, agent tools and historian share.

* `model` — categories, statuses, sources, the de-dup key, TTLs, input validation;
* `engine` — add / promote_facts / edit / archive / restore / merge / remove / list / counts;
* `transfer` — JSON Lines export and import;
* `notes` — session and project notes;
* `store.memories.visible_ids` — the memory ids a session's head shows (search hides them).

All SQL lives in `magic_context.store.memories` and `magic_context.store.notes`.
"""

from magic_context.store.memories import visible_ids

__all__ = ["visible_ids"]
