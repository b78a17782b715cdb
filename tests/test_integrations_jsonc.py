"""Byte-preserving JSON/JSONC edits: one array element in or out, every other byte kept."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from magic_context.errors import BadInput
from magic_context.integrations import jsonc

URL = "file:///home/u/.opencode/magic-context/index.js"

COMMENTED = """{
  // my model
  "model": "anthropic/claude", /* inline */
  "plugin": [
    "opencode-foo", // pinned elsewhere
    ["opencode-bar", {"key": "val"}],
  ],
  "url": "http://x//not-a-comment",
}
"""


def test_append_keeps_comments_indent_and_trailing_comma():
    out = jsonc.append_to_array(COMMENTED, "plugin", URL)
    assert out == COMMENTED.replace('{"key": "val"}],\n', f'{{"key": "val"}}],\n    "{URL}",\n')
    no_trailing = COMMENTED.replace('"val"}],', '"val"}] // last')
    added = jsonc.append_to_array(no_trailing, "plugin", URL)
    assert added == no_trailing.replace('"val"}] // last\n', f'"val"}}], // last\n    "{URL}"\n')
    assert jsonc.remove_from_array(added, "plugin", URL) == no_trailing
    assert jsonc.array_values(out, "plugin")[-1] == URL
    assert jsonc.remove_from_array(out, "plugin", URL) == COMMENTED


@pytest.mark.parametrize(("before", "after"), [
    ('{"plugin": ["a"]}', f'{{"plugin": ["a", "{URL}"]}}'),
    ('{"plugin": []}', f'{{"plugin": ["{URL}"]}}'),
    ('{"plugin": [ ]} // c', f'{{"plugin": ["{URL}"]}} // c'),
    ('{"model": "m"}', f'{{"model": "m", "plugin": ["{URL}"]}}'),
    ('{\n  "model": "m"\n}\n', f'{{\n  "model": "m",\n  "plugin": ["{URL}"]\n}}\n'),
    ("{}", f'{{\n  "plugin": ["{URL}"]\n}}'),
    ("", json.dumps({"plugin": [URL]}, indent=2) + "\n"),
])
def test_append_shapes(before, after):
    assert jsonc.append_to_array(before, "plugin", URL) == after
    assert jsonc.array_values(after, "plugin")[-1] == URL


@pytest.mark.parametrize(("text", "value", "expected"), [
    ('{"p": ["a", "b", "c"]}', "a", '{"p": ["b", "c"]}'),
    ('{"p": ["a", "b", "c"]}', "b", '{"p": ["a", "c"]}'),
    ('{"p": ["a", "b", "c"]}', "c", '{"p": ["a", "b"]}'),
    ('{"p": ["a"]}', "a", '{"p": []}'),
    ('{"p": ["a",]}', "a", '{"p": []}'),
    ('{"p": ["a"]}', "zzz", '{"p": ["a"]}'),
    ('{"q": 1}', "a", '{"q": 1}'),
])
def test_remove_shapes(text, value, expected):
    assert jsonc.remove_from_array(text, "p", value) == expected


@pytest.mark.parametrize("text", ["[1, 2]", '{"plugin": "x"', '{"a": 1} trailing', '{"a": /* open'])
def test_malformed_config_is_bad_input_naming_the_file(text):
    with pytest.raises(BadInput, match=r"opencode\.json"):
        jsonc.append_to_array(text, "plugin", URL, source="opencode.json")


def test_a_non_array_value_is_refused():
    with pytest.raises(BadInput, match="`plugin` is not an array"):
        jsonc.append_to_array('{"plugin": "x"}', "plugin", URL, source="opencode.json")


elements = st.lists(st.text(alphabet="abc/:.-_ ", min_size=1, max_size=8), max_size=4)


@given(elements=elements, multiline=st.booleans(), trailing=st.booleans(), comment=st.booleans())
def test_append_then_remove_restores_the_bytes(elements, multiline, trailing, comment):
    sep = ",\n    " if multiline else ", "
    inner = sep.join(json.dumps(e) for e in elements) + ("," if trailing and elements else "")
    head = "  // settings\n" if comment else ""
    text = f'{{\n{head}  "model": "x",\n  "plugin": [{inner}]\n}}\n'
    added = jsonc.append_to_array(text, "plugin", URL)
    assert jsonc.loads(added)["plugin"] == [*elements, URL]
    assert jsonc.remove_from_array(added, "plugin", URL) == text
