#!/usr/bin/env bash
# Mutation testing of mc's load-bearing modules (opt-in; not part of CI: it takes tens of minutes).
#
#   pip install -e ".[dev,mutation]"
#   bench/mutation.sh                      # every module below, one after another
#   bench/mutation.sh config/trust.py wire/arcs.py   # just these (paths under magic_context/)
#
# mutmut 2.5 mutates one module at a time in a scratch copy of the committed tree (HEAD), so the work tree
# is never touched, and runs only the fast tests that exercise that module, one mutant at a time (one
# worker, `nice -n 15`: the machine is shared). Per module it prints killed/total, the score and the time;
# survivors are listed with their diffs in $OUT/<module>.survivors.txt.
#
# Environment: OUT (results dir, default bench/results/mutation), MODULE_TIMEOUT_S (stop a module after this
# many seconds and report it as incomplete; default 1200), KEEP_SCRATCH=1 (keep the scratch copy).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$REPO/bench/results/mutation}
MODULE_TIMEOUT_S=${MODULE_TIMEOUT_S:-1200}
PYTHON=${PYTHON:-python}

# module (under magic_context/) -> the fast tests that exercise it
declare -A TESTS=(
  [config/trust.py]="tests/test_config_trust.py tests/test_config.py"
  [transform/heuristics.py]="tests/test_heuristics.py"
  [transform/drops.py]="tests/test_transform_units.py"
  [transform/tagger.py]="tests/test_transform_units.py"
  [transform/scheduler.py]="tests/test_transform_units.py"
  [transform/nudges.py]="tests/test_transform_units.py"
  [transform/temporal.py]="tests/test_transform_units.py"
  [transform/ranges.py]="tests/test_transform_units.py"
  [transform/guidance.py]="tests/test_transform_units.py"
  [wire/arcs.py]="tests/test_arcs.py"
  [wire/anthropic.py]="tests/test_wire_anthropic.py"
  [wire/openai.py]="tests/test_wire_openai.py"
  [wire/opencode.py]="tests/test_wire_opencode.py"
  [wire/pi.py]="tests/test_wire_pi.py"
  [wire/responses.py]="tests/test_wire_responses.py"
  [history/validate.py]="tests/test_history_validate.py"
  [history/decay.py]="tests/test_decay.py"
  [store/raw.py]="tests/test_raw_store.py"
  [replay/cost.py]="tests/test_replay_cost.py"
)
ORDER=(config/trust.py transform/heuristics.py wire/arcs.py replay/cost.py history/decay.py history/validate.py
       store/raw.py transform/drops.py transform/tagger.py transform/scheduler.py transform/nudges.py
       transform/temporal.py transform/ranges.py transform/guidance.py wire/anthropic.py wire/openai.py
       wire/opencode.py wire/pi.py wire/responses.py)
MODULES=("$@")
[ ${#MODULES[@]} -eq 0 ] && MODULES=("${ORDER[@]}")

$PYTHON -m mutmut version >/dev/null 2>&1 || { echo "mutmut is missing: pip install -e \".[dev,mutation]\"" >&2; exit 2; }
for module in "${MODULES[@]}"; do
  [ -n "${TESTS[$module]:-}" ] || { echo "no test selection for $module (known: ${ORDER[*]})" >&2; exit 2; }
done

# Scratch copy of HEAD; tests find ../shared relative to the repository root, so link it beside the copy.
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/mc-mutation.XXXXXX")
trap '[ "${KEEP_SCRATCH:-0}" = 1 ] || rm -rf "$SCRATCH"' EXIT
git -C "$REPO" archive HEAD | tar -x -C "$SCRATCH" --one-top-level=repo
ln -s "$(cd "$REPO/.." && pwd)/shared" "$SCRATCH/shared"
mkdir -p "$OUT"
commit=$(git -C "$REPO" rev-parse --short HEAD)

printf '| module | killed | total | score | time | tests |\n|---|---|---|---|---|---|\n' | tee "$OUT/table.md"
cd "$SCRATCH/repo"
for module in "${MODULES[@]}"; do
  rm -f .mutmut-cache
  runner="$PYTHON -m pytest -x -q -p no:randomly -p no:cacheprovider --no-header ${TESTS[$module]}"
  started=$(date +%s)
  set +e
  MAGIC_CONTEXT_MUTATION=1 timeout "$MODULE_TIMEOUT_S" nice -n 15 $PYTHON -m mutmut run \
    --paths-to-mutate "magic_context/$module" --tests-dir tests --runner "$runner" --simple-output --no-progress \
    >"$OUT/${module//\//_}.log" 2>&1
  code=$?
  set -e
  took=$(( $(date +%s) - started ))
  counts=$($PYTHON - "$module" <<'PY'
import sqlite3, sys
conn = sqlite3.connect(".mutmut-cache")
rows = dict(conn.execute(
    "SELECT m.status, count(*) FROM Mutant m JOIN Line l ON m.line = l.id JOIN SourceFile f ON l.sourcefile = f.id "
    "WHERE f.filename = ? GROUP BY m.status", ("magic_context/" + sys.argv[1],)).fetchall())
killed = rows.get("ok_killed", 0) + rows.get("ok_suspicious", 0) + rows.get("bad_timeout", 0)
total = sum(rows.values())
print(killed, total, rows.get("untested", 0))
PY
  )
  read -r killed total untested <<<"$counts"
  note=""
  [ "$code" -eq 124 ] && note=" (stopped at ${MODULE_TIMEOUT_S}s: $untested untested)"
  score=$(awk -v k="$killed" -v t="$total" -v u="$untested" 'BEGIN { d = t - u; printf (d ? "%.0f%%" : "-"), 100 * k / (d ? d : 1) }')
  $PYTHON -m mutmut results >"$OUT/${module//\//_}.survivors.txt" 2>&1 || true
  for id in $($PYTHON -m mutmut result-ids survived 2>/dev/null); do
    { echo "--- mutant $id"; $PYTHON -m mutmut show "$id"; } >>"$OUT/${module//\//_}.survivors.txt" 2>&1 || true
  done
  printf '| %s | %s | %s | %s%s | %ss | %s |\n' "$module" "$killed" "$((total - untested))" "$score" "$note" "$took" \
    "${TESTS[$module]}" | tee -a "$OUT/table.md"
done
echo "mutmut 2.5 on $commit; survivors and their diffs: $OUT/*.survivors.txt" | tee -a "$OUT/table.md"
