"""What `mc memory …` and `mc note …` report: each engine call's outcome as one `results.Result`.

The engine calls (`engine.add`, `notes.dismiss`, …) return rows the agent tools share; these builders
turn them into the command's result — its `data` (keys pinned by tests/test_result_contract.py) and
the one-line message people read — so the commands only parse flags and render.
"""

from __future__ import annotations

from typing import Any

from magic_context.memory import engine
from magic_context.memory.engine import AddResult, MergeResult
from magic_context.memory.transfer import ImportResult
from magic_context.results import Result, Status

DREAMER_OFF = ("the dreamer is off (dreamer.enabled = false): the condition is stored but not checked until it runs; "
               "the note stays pending")


def _plural(count: int) -> str:
    return "ies" if count > 1 else "y"


def listed(project_id: str | None, rows: list[dict[str, Any]], *, now_ms: int) -> Result:
    memories = [engine.public(r, now_ms=now_ms) for r in rows]
    return Result("memory list", {"project_id": project_id, "count": len(memories), "memories": memories})


def shown(row: dict[str, Any]) -> Result:
    return Result("memory show", {"memory": engine.public(row)})


def added(result: AddResult) -> Result:
    return Result("memory add", {"memory": engine.public(result.memory), "created": result.created,
                                 "message": result.message()})


def edited(row: dict[str, Any]) -> Result:
    return Result("memory edit", {"memory": engine.public(row)})


def archived(rows: list[dict[str, Any]], reason: str | None) -> Result:
    memories = [engine.public(r) for r in rows]
    ids = ", ".join(str(r["id"]) for r in memories)
    message = f"Archived memor{_plural(len(memories))} [ID: {ids}]" + (f" ({reason})." if reason else ".")
    return Result("memory archive", {"memories": memories, "message": message})


def restored(row: dict[str, Any]) -> Result:
    return Result("memory restore", {"memory": engine.public(row)})


def merged(result: MergeResult) -> Result:
    return Result("memory merge", {"memory": engine.public(result.memory), "superseded": result.superseded,
                                   "message": result.message()})


def removed(ids: list[int]) -> Result:
    message = f"Removed memor{_plural(len(ids))} [ID: {', '.join(map(str, ids))}]."
    return Result("memory rm", {"removed": ids, "message": message})


def exported(project_id: str, lines: list[str], path: str | None) -> Result:
    """Written to `path`: where and how many; to stdout: the memories themselves."""
    import json

    if path is not None:
        return Result("memory export", {"project_id": project_id, "count": len(lines), "path": path})
    return Result("memory export", {"project_id": project_id, "count": len(lines),
                                    "memories": [json.loads(line) for line in lines]})


def imported(project_id: str, result: ImportResult, *, dry_run: bool) -> Result:
    verb = "would import" if dry_run else "imported"
    message = f"{verb} {result.imported} memories, {result.existing} already present"
    return Result("memory import", {"project_id": project_id, "imported": result.imported,
                                    "existing": result.existing, "dry_run": dry_run, "message": message})


def note_added(note: dict[str, Any], *, dreamer_enabled: bool) -> Result:
    """A conditional note while the dreamer is off is saved, with a warning (nobody checks the condition)."""
    if note["surface_condition"]:
        message = (f"Created smart note #{note['id']}. The dreamer will evaluate its condition:\n"
                   f"- Content: {note['content']}\n- Condition: {note['surface_condition']}")
    else:
        message = f"Saved {note['type']} note #{note['id']}."
    warnings = [DREAMER_OFF] if note["surface_condition"] and not dreamer_enabled else []
    return Result("note add", {"note": note, "message": message, "warnings": warnings},
                  Status.WARN if warnings else Status.OK)


def notes_listed(project_id: str, rows: list[dict[str, Any]]) -> Result:
    return Result("note list", {"project_id": project_id, "count": len(rows), "notes": rows})


def note_dismissed(note: dict[str, Any]) -> Result:
    return Result("note dismiss", {"note": note, "message": f"Note #{note['id']} dismissed."})


__all__ = ["added", "archived", "edited", "exported", "imported", "listed", "merged", "note_added",
           "note_dismissed", "notes_listed", "removed", "restored", "shown"]
