"""What indexing tool calls and tool-output heads buys (issue #12 item 3), FTS only, on the bench's sessions.

    nice -n 10 python bench/search_ablation.py      # after bench/search_bench.py has built its databases

Each variant re-indexes a copy of each cached database with a different `message_text` (prose only, as
the original; + tool inputs; + the first 600 characters of each tool output) and runs the question sets.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.search_bench import CACHE, QUESTIONS, ensure_db, evaluate, summarize  # noqa: E402

VARIANTS = {"prose only (the original)": {"tools": False, "output_head": 0},
            "+ tool inputs": {"tools": True, "output_head": 0},
            "+ tool inputs + output heads (mc)": {"tools": True, "output_head": 600}}


def main() -> int:
    from magic_context.search import indexer
    from magic_context.search import text as st
    from magic_context.store.db import open_db

    original = st.message_text
    print("| index holds | session | recall@1 | recall@5 | MRR | exact r@5 | paraphrase r@5 | tool rows in top 5 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, options in VARIANTS.items():
        st.message_text = lambda msg, _o=options: original(msg, **_o)
        for spec_path in sorted(QUESTIONS.glob("*.json")):
            spec = json.loads(spec_path.read_text())
            source = ensure_db(spec, False)
            copy = CACHE / "ablation.db"
            shutil.copy(source, copy)
            conn = open_db(str(copy))
            conn.execute("DELETE FROM message_text")
            conn.execute("DELETE FROM search_state WHERE key LIKE 'indexed:%' OR key LIKE 'count:%'")
            for (pk,) in conn.execute("SELECT id FROM sessions").fetchall():
                indexer.index_session(conn, pk)
            conn.close()
            rows = evaluate(copy, spec, "off")["rows"]
            s, ex, pa = summarize(rows), summarize(rows, ("exact",)), summarize(rows, ("paraphrase",))
            shown = [role for r in rows for role in r["roles"]]
            tool_share = sum(1 for role in shown if role == "tool") / max(1, len(shown))
            print(f"| {name} | {Path(spec['session']).stem[:28]} | {s['r1']:.2f} | {s['r5']:.2f} | {s['mrr']:.2f} | "
                  f"{ex['r5']:.2f} | {pa['r5']:.2f} | {tool_share:.0%} |")
    st.message_text = original
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
