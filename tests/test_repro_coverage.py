"""Issue #14 acceptance: every reproducer in ../shared/data/repro/ has a test that shows the expected behaviour.

The map below names, for each reproducer file and each defect its README lists without a file, the tests
that show the expected behaviour (the README's "expected" column). This test fails when a reproducer lands
without an entry, when a named test is gone, or when a test for a file no longer reads that file.
"""

from __future__ import annotations

import ast

from conftest import REPO

REPRO = REPO.parent / "shared" / "data" / "repro"

# reproducer -> tests ("path::function") that show its expected behaviour
COVERED: dict[str, list[str]] = {
    "trust_bypass.sh": [  # the project tier cannot lower, shorten, stretch or switch off; doctor lists it
        "tests/test_config_trust.py::test_repro_trust_bypass_script_now_holds"],
    "make_five_mb_tool_output.py": [  # bounded preview with its tag, recoverable, the request fits
        "tests/test_repro_oversized.py::test_the_five_mb_tool_output_is_previewed_and_the_request_fits"],
    "deep_tool_input_300.json": [  # handled by a real pass every time, never a silent fallback
        "tests/test_deep_nesting.py::test_the_repro_is_served_by_a_real_pass_every_time"],
    "orphan_tool_result.json": [  # the orphan result is removed (never tagged): a request the provider accepts
        "tests/test_repro_pairing.py::test_the_repro_is_served_valid_and_the_same_every_pass",
        "tests/test_repro_pairing.py::test_the_orphan_result_is_removed_and_never_tagged"],
    "unanswered_tool_use.json": [  # the call is answered with a synthetic error result, as harnesses do
        "tests/test_repro_pairing.py::test_the_repro_is_served_valid_and_the_same_every_pass",
        "tests/test_repro_pairing.py::test_the_unanswered_call_is_answered_like_the_harnesses_do"],
    "opencode_info_string_crash.json": [  # exit 2, one line naming the field, nothing written
        "tests/test_repro_bad_input.py::test_repro_exits_2_naming_the_field_and_writes_nothing_on_a_fresh_machine",
        "tests/test_repro_bad_input.py::test_repro_exit_2_leaves_an_existing_database_untouched"],
    "project_dir_nul.json": [
        "tests/test_repro_bad_input.py::test_repro_exits_2_naming_the_field_and_writes_nothing_on_a_fresh_machine",
        "tests/test_repro_bad_input.py::test_repro_exit_2_leaves_an_existing_database_untouched"],
    "now_1e30.json": [
        "tests/test_repro_bad_input.py::test_repro_exits_2_naming_the_field_and_writes_nothing_on_a_fresh_machine",
        "tests/test_repro_bad_input.py::test_repro_exit_2_leaves_an_existing_database_untouched"],
    "opencode_status_list.json": [
        "tests/test_repro_bad_input.py::test_repro_exits_2_naming_the_field_and_writes_nothing_on_a_fresh_machine",
        "tests/test_repro_bad_input.py::test_opencode_wrong_typed_fields_name_the_field"],
    "empty_bare_array.json": [  # an empty conversation is served unchanged
        "tests/test_repro_bad_input.py::test_the_empty_bare_array_repro_is_served_unchanged"],
}

# The README's "Also seen (no file needed)" defects -> their tests.
SEEN_WITHOUT_FILE: dict[str, list[str]] = {
    "8 processes starting at once on a missing database": [
        "tests/test_first_use_concurrency.py::test_eight_processes_starting_on_a_missing_database_all_serve",
        "tests/test_first_use_concurrency.py::test_a_transform_that_cannot_get_the_migration_lock_serves_the_input_unchanged",
        "tests/fault/test_concurrency.py::test_fresh_database_start_race"],
    "a historian killed with kill -9 shows as running": [
        "tests/test_leases.py::test_a_killed_historian_is_not_shown_running_and_wrapup_takes_over_at_once",
        "tests/fault/test_kill.py::test_kill_9_during_historian_runs"],
    "a key under any api_key_env name lands in the database and status": [
        "tests/test_secrets_redaction.py::test_an_echoed_key_of_any_env_name_is_redacted_everywhere"],
    "the estimator collapses runs and undercounts CJK": [
        "tests/test_tokens_runs_cjk.py::test_the_reported_cases",
        "tests/test_tokens_runs_cjk.py::test_generated_cjk_text"],
    "exit 2 on a fresh machine creates the data directory and a cache file": [
        "tests/test_repro_bad_input.py::test_repro_exits_2_naming_the_field_and_writes_nothing_on_a_fresh_machine",
        "tests/test_repro_bad_input.py::test_invalid_json_on_a_fresh_machine_writes_nothing"],
    # Peak memory is measured by bench/memory_bench.py (the issue asks for a benchmark, not a timed test).
}


def _functions(path: str) -> dict[str, str]:
    """Test function name -> its source, for one test file."""
    source = (REPO / path).read_text(encoding="utf-8")
    tree = ast.parse(source)
    return {node.name: ast.get_source_segment(source, node) or "" for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_every_reproducer_file_has_a_test():
    files = {p.name for p in REPRO.iterdir() if p.name != "README.md"}
    assert files == set(COVERED), f"reproducers without a test: {sorted(files - set(COVERED))}"


def test_every_named_test_exists_and_reads_its_reproducer():
    for name, tests in [*COVERED.items(), *SEEN_WITHOUT_FILE.items()]:
        for ref in tests:
            path, function = ref.split("::")
            functions = _functions(path)
            assert function in functions, f"{name}: {ref} is gone"
        if name in COVERED:  # the file is read by one of its tests or by a helper of the same module
            modules = {(REPO / ref.split("::")[0]).read_text(encoding="utf-8") for ref in tests}
            stem = name.rsplit(".", 1)[0]
            assert any(stem in text for text in modules), f"no test module of {name} reads it"


def test_the_readme_still_lists_what_is_mapped():
    readme = (REPRO / "README.md").read_text(encoding="utf-8")
    for name in COVERED:
        assert f"`{name}`" in readme or name in readme, name
