"""DocumentTree: incremental edits equal fresh parses, errors are reported at str offsets."""

from __future__ import annotations

import random

import pytest

from dg_lsp.syntax import DocumentTree, Utf8Index, language_for
from dg_lsp.syntax.tree import ShorterFills, count_errors, parse, reparse_edited

TRICKY = ["😀", "中文", "é", "e\u0301", "👩\u200d👩\u200d👧", "𝔘", "\n", "  ", "\t", "(", ")", "{", "}", ":", ";", "x", "=", "\"", "'''", "# ", "// ", "1", "def ", "return "]

SEEDS = {
    "python": "def f(x):\n    return x  # 😀\n\nclass A:\n    s = '中文 e\u0301'\n",
    "javascript": "function f(a) {\n  return a + '😀';\n}\n",
    "typescript": "let x: string = '中';\nfunction g(): void {}\n",
    "rust": "fn main() {\n    let s = \"é中\";\n}\n",
    "go": "package main\n\nfunc f() string { return \"😀\" }\n",
    "c": "int x = 1; /* 中 */\n",
    "cpp": "int main() { return 0; } // 𝔘\n",
    "java": "class A { String m() { return \"😀\"; } }\n",
    "markdown": "# Tïtle 😀\n\npara 中\n\n- item\n",
}


def shape(tree) -> list[tuple[str, int, int, bool]]:
    """Every node's type, byte range and MISSING flag, in document order: a parse's full identity."""
    nodes, stack = [], [tree.root_node]
    while stack:
        node = stack.pop()
        nodes.append((node.type, node.start_byte, node.end_byte, node.is_missing))
        stack.extend(reversed(node.children))
    return nodes


def random_edit(rng: random.Random, text: str) -> tuple[int, int, str]:
    start = rng.randint(0, len(text))
    end = min(len(text), start + rng.choice([0, 0, 1, 2, 7]))
    return start, end, "".join(rng.choice(TRICKY) for _ in range(rng.randint(0, 3)))


@pytest.mark.parametrize("language_id", sorted(SEEDS))
def test_random_edit_scripts_match_fresh_parse(language_id: str) -> None:
    spec = language_for(language_id, None)
    for seed in range(8):
        rng = random.Random(f"{language_id}-{seed}")
        text = SEEDS[language_id]
        document = DocumentTree(text, spec)
        for _ in range(20):
            start, end, new = random_edit(rng, text)
            document.apply_edit(start, end, new)
            text = text[:start] + new + text[end:]
            fresh = parse(text, spec)
            assert document.text == text
            assert str(document.tree.root_node) == str(fresh.root_node)
            assert shape(document.tree) == shape(fresh)
            check = DocumentTree(text, spec)
            assert document.error_ranges() == check.error_ranges()


def test_incremental_parse_reuses_the_old_tree() -> None:
    """After a small edit, only the edited region should be reported as changed."""
    spec = language_for("python", None)
    text = "".join(f"def f{i}(x):\n    return x + {i}  # 😀\n\n" for i in range(50))
    document = DocumentTree(text, spec)
    old = document.tree
    position = text.index("return x + 25") + len("return x + ")
    document.apply_edit(position, position + 2, "99")
    changed = old.changed_ranges(document.tree)
    assert all(r.end_byte - r.start_byte < 40 for r in changed)
    assert document.text[position : position + 2] == "99"


def test_reparse_edited_leaves_the_original_tree_alone() -> None:
    spec = language_for("python", None)
    text = "class A:\n    def f(self):\n        return (self.x, self.y\n\n    def g(self):\n        pass\n"
    tree = parse(text, spec)
    before = str(tree.root_node)
    begin = text.index("        return")
    finish = text.index("\n", begin)
    blank = " " * (finish - begin)
    edited = reparse_edited(tree, text, Utf8Index(text), begin, finish, blank, spec)
    assert str(tree.root_node) == before and tree.root_node.has_error
    steady = text[:begin] + blank + text[finish:]
    assert str(edited.root_node) == str(parse(steady, spec).root_node)
    assert not edited.root_node.has_error


def test_replace_text_resynchronises() -> None:
    document = DocumentTree("x = (", language_for("python", None))
    assert document.has_errors()
    document.replace_text("x = 1\n")
    assert not document.has_errors() and document.error_ranges() == []


def test_edit_outside_text_is_rejected() -> None:
    document = DocumentTree("abc", language_for("python", None))
    with pytest.raises(ValueError):
        document.apply_edit(2, 9, "x")
    with pytest.raises(ValueError):
        document.apply_edit(2, 1, "x")


def test_error_offsets_are_str_offsets_after_wide_characters() -> None:
    text = "s = '😀中文'\nx = = 1\n"
    document = DocumentTree(text, language_for("python", None))
    errors = document.error_ranges()
    assert errors, "the doubled '=' must produce an error"
    line2 = text.index("x = = 1")
    assert all(line2 <= e.start <= e.end <= len(text) for e in errors)
    assert any("=" in text[e.start : e.end] for e in errors)
    assert document.has_errors(line2, line2 + 7)
    assert not document.has_errors(0, line2 - 2)


def test_missing_node_is_reported_as_missing() -> None:
    text = "function f() {\n  return '😀';\n"
    document = DocumentTree(text, language_for("javascript", None))
    missing = [e for e in document.error_ranges() if e.missing]
    assert [e.node_type for e in missing] == ["}"]
    assert missing[0].start == missing[0].end
    assert document.has_errors()


def test_a_missing_hidden_token_is_an_error_where_it_is_missing() -> None:
    # Two statements on one line: tree-sitter inserts a MISSING `_newline`, a hidden rule that no
    # `children` list shows; only the block's error flag says the text does not parse.
    text = "def total(values):\n    return sum(values)values\n"
    document = DocumentTree(text, language_for("python", None))
    [error] = document.error_ranges()
    assert error.missing and error.start == error.end == text.index("values\n")
    assert count_errors(text, language_for("python", None)) == 1
    assert count_errors(text.replace(")values", ")"), language_for("python", None)) == 0


def test_shorter_fills_count_errors_as_fresh_parses_do() -> None:
    spec = language_for("python", None)
    prefix, suffix = "def f(values):\n    return sum(values", "\n\nx = 1\n"
    shorter = ShorterFills(prefix, ")values", suffix, spec)
    assert shorter.first_error() == 1  # the statement ends after `)`; `values` starts a second one
    fill = ")values + [1, (2"
    shorter = ShorterFills(prefix, fill, suffix, spec)
    for cut in range(len(fill) - 1, -1, -1):
        assert shorter.errors(cut) == count_errors(prefix + fill[:cut] + suffix, spec), cut
    with pytest.raises(ValueError):
        shorter.errors(1)


def test_clean_document_has_no_errors() -> None:
    document = DocumentTree("fn main() { let 中 = 1; }\n", language_for("rust", None))
    assert document.error_ranges() == [] and not document.has_errors()


def test_error_after_an_edit_moves_with_the_text() -> None:
    document = DocumentTree("a = 1\nb = (\n", language_for("python", None))
    before = document.error_ranges()
    document.apply_edit(0, 0, "s = '😀😀'\n")
    after = document.error_ranges()
    assert len(before) == len(after)
    shift = len("s = '😀😀'\n")
    assert [(e.start - shift, e.end - shift) for e in after] == [(e.start, e.end) for e in before]


@pytest.mark.parametrize("text", ["", "abc", "a😀b中é\u0301x", "😀😀", "\U0010ffff", "e\u0301\u0301", "a\ud800b"])
def test_utf8_index_round_trips(text: str) -> None:
    index = Utf8Index(text)
    encoded = text.encode("utf-8", "surrogatepass")
    assert index.byte_length == len(encoded)
    for offset in range(len(text) + 1):
        byte = len(text[:offset].encode("utf-8", "surrogatepass"))
        assert index.to_byte(offset) == byte
        assert index.to_str(byte) == offset


def test_utf8_index_maps_inner_bytes_to_their_character() -> None:
    index = Utf8Index("a😀b")
    assert [index.to_str(b) for b in range(7)] == [0, 1, 1, 1, 1, 2, 3]
