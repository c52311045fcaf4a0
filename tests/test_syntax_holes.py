"""Hole finding (placeholders, marker comments) and "Complete this body" ranges.

`enclosing_body` cases mark the cursor with `<|>`; each expected hole is given as the document
with `[[`...`]]` around the hole's range (`[[]]` for an insertion point).
"""

from __future__ import annotations

import pytest

from dg_lsp.syntax import HoleKind, enclosing_body, extract_context, find_holes, language_for, postprocess
from dg_lsp.syntax.tree import DocumentTree


def spec_of(language: str | None):
    return language_for(language, None) if language else None


def texts(text: str, holes) -> list[str]:
    return [text[h.start : h.end] for h in holes]


FIND_CASES = [
    (
        "python",
        "import os\n\ndef f(x):\n    pass\n\ndef g():\n    ...\n\ndef h():\n    '''Doc.'''\n    pass\n",
        ["pass", "...", "pass"],
    ),
    ("python", "def f(): ...\nclass P:\n    def m(self): pass\n", ["...", "pass"]),
    # Legitimate uses are not holes: class bodies, except clauses, `...` in expressions, real bodies.
    (
        "python",
        "class E(Exception):\n    pass\n\ntry:\n    x()\nexcept E:\n    pass\n\nT = Callable[..., int]\n"
        "def f(x):\n    y = 1\n    pass\n",
        [],
    ),
    ("python", "def f():\n    # TODO(dg): parse the header\n    return 1\n", ["# TODO(dg): parse the header"]),
    ("python", "s = 'TODO(dg) inside a string'\nt = \"\"\"\n# TODO(dg)\n\"\"\"\n", []),
    ("rust", "fn f() -> i32 {\n    todo!()\n}\nfn g() { unimplemented!(); }\n", ["todo!()", "unimplemented!();"]),
    ("rust", "fn f() -> i32 {\n    let x = todo!(\"later\");\n    x\n}\n", ['todo!("later")']),
    ("rust", "// TODO(dg) write the parser\nfn p() {}\n/* TODO(dg): and this */\n", ["// TODO(dg) write the parser", "/* TODO(dg): and this */"]),
    ("rust", "fn f() { let s = \"todo!()\"; }\n", []),
    ("javascript", "function f() {\n  // TODO(dg): validate input\n}\n", ["// TODO(dg): validate input"]),
    ("typescript", "const x: number = 1; /* TODO(dg) */\n", ["/* TODO(dg) */"]),
    ("go", "func f() {\n\t// TODO(dg): retry\n}\n", ["// TODO(dg): retry"]),
    ("c", "int f(void) {\n    /* TODO(dg) */\n    return 0;\n}\n", ["/* TODO(dg) */"]),
    ("cpp", "int f() { return 0; } // TODO(dg) faster\n", ["// TODO(dg) faster"]),
    ("java", "class A {\n  // TODO(dg): add getters\n}\n", ["// TODO(dg): add getters"]),
    ("markdown", "# Title\n\n<!-- TODO(dg): write the intro -->\n\nText.\n", ["<!-- TODO(dg): write the intro -->"]),
    (None, "x = 1  # TODO(dg) fix\ny = 2 -- TODO(dg)\nno marker TODO(dg) here\n", ["# TODO(dg) fix", "-- TODO(dg)"]),
    (None, "plain text only\n", []),
]


@pytest.mark.parametrize(("language", "text", "expected"), FIND_CASES)
def test_find_holes(language: str | None, text: str, expected: list[str]) -> None:
    holes = find_holes(text, spec_of(language), ["TODO(dg)"])
    assert texts(text, holes) == expected
    assert [h.start for h in holes] == sorted(h.start for h in holes)


def test_hole_kinds_and_indent() -> None:
    text = "class A:\n    def f(self):\n        pass\n    # TODO(dg): more methods\n"
    holes = find_holes(text, language_for("python", None), ["TODO(dg)"])
    assert [(h.kind, h.indent) for h in holes] == [("placeholder", "        "), ("marker", "    ")]


def test_markers_are_configurable() -> None:
    text = "// FIXME(me): one\n// TODO(dg): two\nfn f() {}\n"
    spec = language_for("rust", None)
    assert texts(text, find_holes(text, spec, ["FIXME(me)"])) == ["// FIXME(me): one"]
    assert texts(text, find_holes(text, spec, ["FIXME(me)", "TODO(dg)"])) == ["// FIXME(me): one", "// TODO(dg): two"]
    assert texts(text, find_holes(text, spec)) == ["// TODO(dg): two"]


def test_hole_offsets_after_wide_characters() -> None:
    text = "s = '😀中e\u0301'\ndef f():\n    pass\n# TODO(dg) 😀\n"
    holes = find_holes(text, language_for("python", None))
    assert texts(text, holes) == ["pass", "# TODO(dg) 😀"]


def expected_range(marked: str) -> tuple[str, int, int]:
    start = marked.index("[[")
    end = marked.index("]]") - 2
    return marked.replace("[[", "").replace("]]", ""), start, end


BODY_CASES = [
    ("python", "def f(x):\n    p<|>ass\n", "def f(x):\n    [[pass]]\n", "placeholder"),
    ("python", "def f<|>(x):\n    ...\n", "def f(x):\n    [[...]]\n", "placeholder"),
    ("python", 'def f(x):\n    """Doc."""\n    pa<|>ss\n', 'def f(x):\n    """Doc."""\n    [[pass]]\n', "placeholder"),
    ("python", "def f(x):\n    <|>\n", "def f(x):\n    [[]]\n", "empty"),
    ("python", "def f(x):\n<|>", "def f(x):\n[[]]", "empty"),
    ("python", "def f(x):<|>", "def f(x):[[]]", "empty"),
    ("python", "class A:\n    def f(self):\n        <|>\n\n    def g(self):\n        return 1\n", "class A:\n    def f(self):\n        [[]]\n\n    def g(self):\n        return 1\n", "empty"),
    ("python", 'def f():\n    """Doc."""\n\n<|>', 'def f():\n    """Doc."""\n[[]]\n', "empty"),
    ("python", "def f(x):\n    return <|>x\n", None, None),
    ("python", "x = 1<|>\n", None, None),
    ("javascript", "function f(a) {\n  <|>\n}\n", "function f(a) {\n  [[]]\n}\n", "empty"),
    ("javascript", "function f(a) {<|>}\n", "function f(a) {[[]]}\n", "empty"),
    ("javascript", "function f(a) {\n<|>}\n", "function f(a) {[[]]\n}\n", "empty"),
    ("javascript", "function f(a) {\n  // explain\n\n  <|>\n}\n", "function f(a) {\n  // explain\n[[]]\n  \n}\n", "empty"),
    ("javascript", "function f(a) {\n  return a<|>;\n}\n", None, None),
    ("typescript", "class A {\n  m(): number {\n    <|>\n  }\n}\n", "class A {\n  m(): number {\n    [[]]\n  }\n}\n", "empty"),
    ("rust", "fn f() -> i32 {\n    to<|>do!()\n}\n", "fn f() -> i32 {\n    [[todo!()]]\n}\n", "placeholder"),
    ("rust", "fn f() {\n    <|>\n}\n", "fn f() {\n    [[]]\n}\n", "empty"),
    ("go", "func f() int {\n\t<|>\n}\n", "func f() int {\n\t[[]]\n}\n", "empty"),
    ("c", "int f(void) {\n    <|>\n}\n", "int f(void) {\n    [[]]\n}\n", "empty"),
    ("cpp", "struct S {\n  int m() {<|>}\n};\n", "struct S {\n  int m() {[[]]}\n};\n", "empty"),
    ("java", "class A {\n    void m() {\n        <|>\n    }\n}\n", "class A {\n    void m() {\n        [[]]\n    }\n}\n", "empty"),
    ("java", "class A {\n    void m() {\n        if (x) {\n            <|>\n        }\n        y();\n    }\n}\n", "class A {\n    void m() {\n        if (x) {\n            [[]]\n        }\n        y();\n    }\n}\n", "empty"),
    ("markdown", "# T\n\nText<|>\n", None, None),
    (None, "f {\n  <|>\n}\n", None, None),
]


@pytest.mark.parametrize(("language", "source", "expected", "kind"), BODY_CASES)
def test_enclosing_body(language: str | None, source: str, expected: str | None, kind: str | None) -> None:
    offset = source.index("<|>")
    text = source.replace("<|>", "")
    hole = enclosing_body(text, offset, spec_of(language))
    if expected is None:
        assert hole is None
        return
    assert hole is not None
    expected_text, start, end = expected_range(expected)
    assert expected_text == text
    assert (hole.start, hole.end, hole.kind) == (start, end, kind)


BODY_FILLS = [
    ("python", "def f(x):\n    pass\n", "return x + 1\n\ndef g():\n    pass", "def f(x):\n    return x + 1\n"),
    ("python", "def f(x):\n\n", "    return x + 1\n", "def f(x):\n    return x + 1\n"),
    ("python", "def f(x):", "\n    return x + 1\n", "def f(x):\n    return x + 1"),
    ("javascript", "function f(a) {\n}\n", "\n  return a + 1;\n}\n", "function f(a) {\n  return a + 1;\n}\n"),
    ("javascript", "function f(a) {}\n", "\n  return a + 1;\n", "function f(a) {\n  return a + 1;\n}\n"),
    ("javascript", "function f(a) {\n  \n}\n", "return a + 1;\n}", "function f(a) {\n  return a + 1;\n}\n"),
    ("rust", "fn f(a: i32) -> i32 {\n    todo!()\n}\n", "a + 1\n}", "fn f(a: i32) -> i32 {\n    a + 1\n}\n"),
    ("go", "func f(a int) int {\n}\n", "\n\treturn a + 1\n}\n", "func f(a int) int {\n\treturn a + 1\n}\n"),
]


@pytest.mark.parametrize(("language", "text", "raw", "expected"), BODY_FILLS)
def test_body_hole_round_trip(language: str, text: str, raw: str, expected: str) -> None:
    """The hole range, fed to extract_context and postprocess as the server does, yields clean code."""
    spec = language_for(language, None)
    offset = text.index("f(") + 1
    hole = enclosing_body(text, offset, spec)
    assert hole is not None
    ctx = extract_context(text, hole.start, hole.end, spec)
    assert ctx.kind in (HoleKind.BLOCK_BODY, HoleKind.REST_OF_LINE, HoleKind.SELECTION)
    fill = postprocess(raw, ctx, spec)
    result = text[: hole.start] + fill + text[hole.end :]
    assert result == expected
    assert not DocumentTree(result, spec).has_errors()


def test_unknown_language_has_no_enclosing_body() -> None:
    assert enclosing_body("def f():\n    pass\n", 12, None) is None
