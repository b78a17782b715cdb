#!/usr/bin/env bash
# Mutation testing of mc's load-bearing modules (opt-in, not in CI: it takes tens of minutes).
#
#   pip install -e ".[dev,mutation]"
#   bench/mutation.sh                                  # every module in ORDER below, one after another
#   bench/mutation.sh config/trust.py wire/arcs.py     # just these (paths under magic_context/)
#
# mutmut 3.8 (config: [tool.mutmut] in pyproject.toml) runs in a scratch copy of the committed tree (HEAD), so
# the work tree is never touched. It mutates the load-bearing modules, records once which of the fast tests
# reach each function, then checks the mutants of one module at a time with only those tests: one worker
# (--max-children 1, WORKERS to change it) under `nice -n 15`, as the machine is shared. Per module it prints killed/total, the
# score and the time; the survivors' diffs go to $OUT/<module>.survivors.txt.
#
# Environment: OUT (results, default bench/results/mutation), MODULE_TIMEOUT_S (stop a module after this many
# seconds and report what was checked; default 1200), KEEP_SCRATCH=1 (keep the scratch copy for `mutmut browse`),
# WORKERS (mutants checked at once, default 1), FUNCTIONS (mutmut name globs inside the module, e.g.
# "x__fold* x__measure*": re-check only the functions a fix changed; the others stay "not checked"), MC_HYPOTHESIS_SCALE (examples drawn by the codec and heuristics property tests, as a share of their full figure;
# default 0.1 here, 1 elsewhere: tests/hypothesis_budget.py).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$REPO/bench/results/mutation}
MODULE_TIMEOUT_S=${MODULE_TIMEOUT_S:-1200}
WORKERS=${WORKERS:-1}
MUTMUT=${MUTMUT:-mutmut}
export MC_HYPOTHESIS_SCALE=${MC_HYPOTHESIS_SCALE:-0.1}
# module (under magic_context/) -> the fast tests that exercise it
declare -A TESTS=(
  [config/trust.py]="tests/test_config_trust.py tests/test_config.py"
  [transform/heuristics.py]="tests/test_heuristics.py"
  [wire/arcs.py]="tests/test_arcs.py"
  [replay/cost.py]="tests/test_replay_cost.py"
  [history/decay.py]="tests/test_decay.py"
  [history/validate.py]="tests/test_history_validate.py"
  [store/raw.py]="tests/test_raw_store.py"
  [transform/drops.py]="tests/test_transform_units.py tests/test_drops.py"
  [transform/tagger.py]="tests/test_transform_units.py tests/test_tagger.py"
  [transform/scheduler.py]="tests/test_transform_units.py tests/test_scheduler.py"
  [transform/nudges.py]="tests/test_transform_units.py tests/test_nudges.py"
  [transform/temporal.py]="tests/test_transform_units.py tests/test_transform_pure.py"
  [transform/ranges.py]="tests/test_transform_units.py tests/test_transform_pure.py"
  [transform/guidance.py]="tests/test_transform_units.py tests/test_transform_pure.py"
  [transform/head.py]="tests/test_head.py tests/test_memory_head.py"
  [transform/reclaim.py]="tests/test_reclaim_accounting.py tests/test_transform_units.py"
  [transform/accounting.py]="tests/test_reclaim_accounting.py tests/test_transform_units.py"
  [transform/state.py]="tests/test_session_state_and_note_nudge.py"
  [transform/tags.py]="tests/test_tag_rows.py"
  [transform/note_nudge.py]="tests/test_session_state_and_note_nudge.py tests/test_memory_head.py"
  [transform/flags.py]="tests/test_transform_protocol.py tests/test_docs.py"
  [transform/protocol.py]="tests/test_transform_protocol.py tests/test_transform_units.py tests/test_repro_bad_input.py"
  [transform/hook.py]="tests/test_transform_protocol.py tests/test_response_usage.py tests/test_deep_nesting.py"
  # stages/pipeline: only the in-process passes count (the CLI tests run the pipeline in a subprocess, which
  # mutmut neither traces nor mutates); these few keep a pipeline mutant to seconds
  [transform/stages.py]="tests/test_pipeline_helpers.py tests/test_pipeline_passes.py tests/test_memory_head.py tests/test_response_usage.py tests/test_transform_protocol.py"
  [transform/pipeline.py]="tests/test_pipeline_helpers.py tests/test_pipeline_passes.py tests/test_memory_head.py tests/test_response_usage.py
    tests/test_transform_protocol.py tests/test_heuristics.py"
  [wire/anthropic.py]="tests/test_wire_anthropic.py"
  [wire/openai.py]="tests/test_wire_openai.py"
  [wire/opencode.py]="tests/test_wire_opencode.py"
  [wire/pi.py]="tests/test_wire_pi.py"
  [wire/responses.py]="tests/test_wire_responses.py"
)
ORDER=(config/trust.py transform/heuristics.py wire/arcs.py replay/cost.py history/decay.py history/validate.py
       store/raw.py transform/drops.py transform/tagger.py transform/scheduler.py transform/nudges.py
       transform/temporal.py transform/ranges.py transform/guidance.py transform/head.py
       transform/reclaim.py transform/accounting.py transform/state.py transform/note_nudge.py
       transform/tags.py wire/anthropic.py wire/openai.py
       wire/opencode.py wire/pi.py wire/responses.py)
ORDER+=(transform/flags.py transform/protocol.py transform/hook.py transform/stages.py transform/pipeline.py)
MODULES=("$@")
[ ${#MODULES[@]} -eq 0 ] && MODULES=("${ORDER[@]}")

command -v "$MUTMUT" >/dev/null || { echo "mutmut is missing: pip install -e \".[dev,mutation]\"" >&2; exit 2; }
for module in "${MODULES[@]}"; do
  [ -n "${TESTS[$module]:-}" ] || { echo "no test selection for $module (known: ${ORDER[*]})" >&2; exit 2; }
done

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/mc-mutation.XXXXXX")
trap '[ "${KEEP_SCRATCH:-0}" = 1 ] || rm -rf "$SCRATCH"' EXIT
git -C "$REPO" archive HEAD | tar -x -C "$SCRATCH" --one-top-level=repo
# Tests find ../shared beside the repository root; mutmut runs them from repo/mutants.
ln -s "$(cd "$REPO/.." && pwd)/shared" "$SCRATCH/shared"
ln -s "$(cd "$REPO/.." && pwd)/shared" "$SCRATCH/repo/shared"
cd "$SCRATCH/repo"
# Mutate only the modules asked for, and trace only their tests (the config lists every module and test).
selection=$(for module in "${MODULES[@]}"; do echo ${TESTS[$module]}; done | tr ' ' '\n' | sort -u | tr '\n' ' ')
python3 - "$selection" "${MODULES[@]}" <<'PY'
import re, sys
text = open("pyproject.toml").read()
mutate = ", ".join(f'"magic_context/{m}"' for m in sys.argv[2:])
tests = ", ".join(f'"{t}"' for t in sys.argv[1].split())
text = re.sub(r"only_mutate = \[.*?\]", f"only_mutate = [{mutate}]", text, flags=re.S)
text = re.sub(r"pytest_add_cli_args_test_selection = \[.*?\]", f"pytest_add_cli_args_test_selection = [{tests}]",
              text, flags=re.S)
open("pyproject.toml", "w").write(text)
PY
mkdir -p "$OUT"
commit=$(git -C "$REPO" rev-parse --short HEAD)

counts() {  # killed checked total for one module, from `mutmut results --all`
  "$MUTMUT" results --all true 2>/dev/null | awk -v p="$1." '
    $1 ~ "^"p { total++; sub(/^[^:]*: /, ""); if ($0 != "not checked") checked++; if ($0 == "killed" || $0 == "timeout") killed++ }
    END { print killed + 0, checked + 0, total + 0 }'
}

# Generate the mutants and trace which tests reach which function, once (a pattern that names no mutant).
started=$(date +%s)
nice -n 15 "$MUTMUT" run --max-children 1 "setup-only.*" >"$OUT/setup.log" 2>&1 || true
setup_s=$(( $(date +%s) - started ))

printf '| module | killed / checked | score | time | note |\n|---|---|---|---|---|\n' | tee "$OUT/table.md"
for module in "${MODULES[@]}"; do
  name="magic_context.$(echo "${module%.py}" | tr / .)"
  started=$(date +%s)
  set +e
  patterns=("$name.*")
  [ -n "${FUNCTIONS:-}" ] && patterns=($(for f in $FUNCTIONS; do echo "$name.$f"; done))
  timeout "$MODULE_TIMEOUT_S" nice -n 15 "$MUTMUT" run --max-children "$WORKERS" "${patterns[@]}" >"$OUT/${module//\//_}.log" 2>&1
  code=$?
  set -e
  took=$(( $(date +%s) - started ))
  read -r killed checked total <<<"$(counts "$name")"
  note=""
  [ "$code" -eq 124 ] && note="stopped at ${MODULE_TIMEOUT_S}s: $((total - checked)) of $total not checked"
  [ "$code" -ne 0 ] && [ "$code" -ne 124 ] && note="mutmut exit $code (see the log)"
  score=$(awk -v k="$killed" -v c="$checked" 'BEGIN { if (c) printf "%.0f%%", 100 * k / c; else print "-" }')
  : >"$OUT/${module//\//_}.survivors.txt"
  for mutant in $("$MUTMUT" results 2>/dev/null | awk -v p="$name." '$1 ~ "^"p && $2 != "not" { sub(":", "", $1); print $1 }'); do
    { echo "=== $mutant"; "$MUTMUT" show "$mutant"; } >>"$OUT/${module//\//_}.survivors.txt" 2>&1 || true
  done
  printf '| %s | %s / %s | %s | %ss | %s |\n' "$module" "$killed" "$checked" "$score" "$took" "$note" | tee -a "$OUT/table.md"
done
echo "mutmut $("$MUTMUT" --version | awk '{print $NF}') on $commit, $WORKERS worker(s) under nice -n 15; generating the mutants" \
  "and tracing the tests took ${setup_s}s more. Survivors' diffs: $OUT/*.survivors.txt" | tee -a "$OUT/table.md"
