"""Post-processing model output: suffix overlap, truncation, indentation; error checks and ranking.

Each case is (language, document with `<|>` or `<|`..`|>`, raw model fill, expected cleaned fill).
"""

from __future__ import annotations

import pytest

from dg_lsp.syntax import (
    Budget,
    HoleContext,
    HoleKind,
    adds_syntax_errors,
    extract_context,
    language_for,
    postprocess,
    rank,
)


def marked(source: str) -> tuple[str, int, int]:
    if "<|>" in source:
        start = source.index("<|>")
        return source.replace("<|>", ""), start, start
    start = source.index("<|")
    end = source.index("|>") - 2
    return source.replace("<|", "").replace("|>", ""), start, end


def context(language: str | None, source: str, **kwargs) -> tuple[HoleContext, object, str]:
    text, start, end = marked(source)
    spec = language_for(language, None) if language else None
    return extract_context(text, start, end, spec, Budget(), len, **kwargs), spec, text


CASES = [
    # (a) the fill repeats what follows the cursor
    ("python", "print(foo(<|>))\nprint(2)\n", "a, b))\nprint(2)", "a, b"),
    ("python", "print(foo(<|>, b))\n", "a, b))", "a"),
    ("python", 'print("<|>")\n', 'hello")', "hello"),
    ("javascript", "let a = <|>;\n", "5;", "5"),
    ("javascript", "if (ok(<|>) {\n}\n", "x)) {", "x)"),
    ("python", "x = foo(<|>)\n", "bar()", "bar()"),
    ("python", "x = foo(<|>)\n", "[1, 2]", "[1, 2]"),
    ("python", "x = <|>max(a)\n", "ma", "ma"),
    ("python", 'x = f(<|>"b")\n', '"a", ', '"a", '),
    (
        "javascript",
        "function f(a) {\n  const x = 1;\n  <|>\n  return x;\n}\n",
        "x += a;\n  return x;\n}",
        "x += a;",
    ),
    ("python", "def f(x):\n    y = x\n    <|>\n    return y\n", "y += 1\n    return y\n", "y += 1"),
    ("python", "def f(x):\n    <|>\n    return y\n", "return y\n", ""),
    # (b) rest-of-line holes stop at the end of the line ...
    ("python", "x = <|>\n", "1\ny = 2\n", "1"),
    ("python", "x = <|>\n", "\ny = 2\n", ""),
    ("rust", "let v = <|>;\nlet w = 2;\n", "compute(1);\nlet w = 2;", "compute(1)"),
    # ... unless the line opens a block: then the block, up to the dedent, is kept
    (
        "python",
        "def f(x):\n    if x<|>\n",
        ":\n        return 1\n    else:\n        return 2\nprint(3)",
        ":\n        return 1\n    else:\n        return 2",
    ),
    ("python", "def f(x):<|>", "\n    return x\n\nprint(1)", "\n    return x"),
    ("python", "items = [<|>\n", "\n    1,\n    2,\n]\nfoo()", "\n    1,\n    2,\n]"),
    ("javascript", "function f() {<|>\n", "\n  return 1;\n}\nfoo();", "\n  return 1;\n}"),
    ("javascript", "function f() {<|>\n}\n", "\n  return 1;\n}\n", "\n  return 1;"),
    (
        "javascript",
        "function f(a) {\n  if (a) {<|>\n}\n",
        "\n    g();\n  } else {\n    h();\n  }\n}\n",
        "\n    g();\n  } else {\n    h();\n  }",
    ),
    (
        "go",
        "func f() {\n\tfor i := 0; i < 3; i++ {<|>\n}\n",
        "\n\t\tg(i)\n\t}\n\treturn\n",
        "\n\t\tg(i)\n\t}",
    ),
    # NEW_LINE / BLOCK_BODY holes stop when the text dedents below the level the suffix continues at
    # (at the end of a file: before top-level code)
    ("python", "def f(x):\n    <|>\n", "return x\n\ndef g():\n    pass\n", "return x"),
    ("python", "def f(x):\n    <|>\n", "if x:\n        return 1\n    return 2\nprint(3)", "if x:\n        return 1\n    return 2"),
    ("javascript", "function f(a) {\n  <|>\n}\n", "return a;\n}\nfunction g() {}", "return a;"),
    ("rust", "fn f() -> i32 {\n    <|>\n}\n", "let x = 1;\n    x + 1\n}\nfn g() {}", "let x = 1;\n    x + 1"),
    ("java", "class A {\n    int m() {\n        <|>\n    }\n}\n", "int x = 1;\n        return x;\n    }\n}", "int x = 1;\n        return x;"),
    ("cpp", "int main() {\n  <|>\n}\n", "int x = 0;\n  return x;\n}\n", "int x = 0;\n  return x;"),
    ("c", "int main(void) {\n    <|>\n}\n", "\n\nreturn 0;\n}\n", "return 0;"),
    # (c) indentation: the model's columns stand (in the file's style); a first line in column 0
    # right after a block opener moves, with the lines after it, to the hole's indentation
    ("python", "def f(x):\n<|>\n", "return x", "    return x"),
    ("python", "def f(x):\n<|>\n", "    return x\ndef g():\n    pass", "    return x"),
    # after whitespace the model may be finishing the indentation (a hole cut inside it)
    ("python", "def f(x):\n  <|>\n", "  return x", "  return x"),
    ("python", "def f(x):\n    <|>\n", "if x:\n\t\treturn 1", "if x:\n        return 1"),
    ("python", "def f(x):\n  y = 1\n  <|>\n", "if y:\n      return 1", "if y:\n      return 1"),
    ("go", "func f(a int) {\n\t<|>\n}\n", "if a > 0 {\n        g()\n    }\n}", "if a > 0 {\n\t\tg()\n\t}"),
    ("go", "func f(a int) {\n<|>\n}\n", "\tif a > 0 {\n\t\tg()\n\t}", "\tif a > 0 {\n\t\tg()\n\t}"),
    ("javascript", "function f() {\n\tif (a) {\n\t\tb();\n\t}\n\t<|>\n}\n", "if (c) {\n        d();\n    }", "if (c) {\n\t\td();\n\t}"),
    # trailing whitespace lines go
    ("python", "def f(x):\n    <|>\n", "x = 1   \n\n   \n", "x = 1"),
    ("python", "def f(x):\n    <|>\n", "   \n\n", ""),
    # a multi-line body between braces on one line ends on its own line
    ("javascript", "function f(a) {<|>}\n", "\n  return a;\n", "\n  return a;\n"),
    ("javascript", "function f(a) {<|>}\n", " return a; ", " return a; "),
    # selections are replaced as a unit, stopping at a dedent
    ("python", "def f():\n    <|pass|>\n", "return 1\n\ndef other():\n    pass", "return 1"),
    ("python", "def f():\n<|    pass\n|>", "    x = 1\n    return x\n", "    x = 1\n    return x"),
    # a fill that breaks the file is cut back to its longest start that breaks it least
    ("python", "def total(values):\n    return sum(values<|>\n", ")values", ")"),
    ("python", "class P:\n    def __init__(self, y):\n        <|>\n\n    def n(self):\n        return self.y\n",
     "self.y = y\n        y] = []", "self.y = y"),
    ("python", 'DAYS = ["mon", "tue", <|>, "fri"]\n', '"wed", "thu"]\n"', '"wed", "thu"'),
    # ...but not to nothing, and a fill that parses is left alone
    ("python", "x = <|>\n", ")]", ")]"),
    ("python", "def f(x):\n    return <|>\n", "x + 1 if x else None", "x + 1 if x else None"),
    # unknown languages still get line-level cleanup
    (None, "call(<|>)\nmore\n", "x)\nmore", "x"),
    (None, "block {\n  <|>\n}\n", "a\n  b\n}\nc", "a\n  b"),
]


@pytest.mark.parametrize(("language", "source", "fill", "expected"), CASES)
def test_postprocess(language: str | None, source: str, fill: str, expected: str) -> None:
    ctx, spec, _ = context(language, source)
    assert postprocess(fill, ctx, spec) == expected


def test_result_applied_to_the_document_is_valid() -> None:
    ctx, spec, text = context("python", "class A:\n    def f(self, x):\n<|>\n\nprint(1)\n")
    fill = postprocess("if x:\n    return x * 2\nreturn 0\n", ctx, spec)
    result = text[: ctx.start] + fill + text[ctx.end :]
    assert result == (
        "class A:\n    def f(self, x):\n        if x:\n            return x * 2\n        return 0\n\nprint(1)\n"
    )
    assert not adds_syntax_errors(ctx, fill, spec)


def test_crlf_documents_get_crlf_fills() -> None:
    ctx, spec, _ = context("python", "def f(x):\r\n    <|>\r\n")
    assert postprocess("y = x\r\n    return y\r\n", ctx, spec) == "y = x\r\n    return y"
    assert postprocess("y = x\n    return y\n", ctx, spec) == "y = x\r\n    return y"


def test_paragraph_fills_are_only_trimmed() -> None:
    text = "# T\n\nOld words here.\n"
    start = text.index("Old")
    ctx = extract_context(text, start, start + 15, language_for("markdown", None), kind=HoleKind.PARAGRAPH)
    assert postprocess("\nNew words,\nwrapped.\n\n", ctx, language_for("markdown", None)) == "New words,\nwrapped."


@pytest.mark.parametrize(
    ("language", "source", "fill", "adds"),
    [
        ("python", "x = foo(<|>)\n", "a, b", False),
        ("python", "x = foo(<|>)\n", "a, b))", True),
        ("python", "def f(x):\n    <|>\n", "return x", False),
        ("python", "def f(x):\n    <|>\n", "return (x", True),
        ("javascript", "function f() {\n  <|>\n}\n", "return 1;", False),
        ("javascript", "function f() {\n  <|>\n}\n", "return 1;\n}", True),
        ("rust", "fn f() -> i32 {\n    <|>\n}\n", "1 +", True),
        ("go", "func f() {\n\t<|>\n}\n", "g()", False),
        ("java", "class A {\n  void m() {\n    <|>\n  }\n}\n", "int x = ;", True),
        (None, "x(<|>)", "((((", False),
    ],
)
def test_adds_syntax_errors(language: str | None, source: str, fill: str, adds: bool) -> None:
    ctx, spec, _ = context(language, source)
    assert adds_syntax_errors(ctx, fill, spec) is adds


def test_adds_syntax_errors_ignores_errors_already_in_the_file() -> None:
    ctx, spec, _ = context("python", "x = (\n\ndef f():\n    <|>\n")
    assert not adds_syntax_errors(ctx, "return 1", spec)


def test_rank_puts_error_free_candidates_first_then_keeps_the_engines_order() -> None:
    ctx, spec, _ = context("python", "x = foo(<|>)\n")
    assert rank(["a))", "a", "b", "c ]"], ctx, spec) == [1, 2, 0, 3]


def test_rank_without_a_language_keeps_the_engines_order() -> None:
    ctx, _, _ = context(None, "x = foo(<|>)\n")
    assert rank(["a))", "a", "b"], ctx, None) == [0, 1, 2]


def test_drafts_skip_the_parses(monkeypatch) -> None:
    # Drafts are post-processed after every denoising step; only the final fill pays for parses.
    from dg_lsp.syntax import tree

    calls = []
    original = tree.parse
    monkeypatch.setattr(tree, "parse", lambda text, spec: calls.append(text) or original(text, spec))
    tree.forget_error_counts()
    ctx, spec, _ = context("python", "def f(n):\n    if n == 0:\n <|>= 1:\n        return 1\n")
    fill = "       return 0\n    if n ="
    assert postprocess(fill, ctx, spec, check_syntax=False) == "       return 0\n    if n "
    assert calls == []
    assert postprocess(fill, ctx, spec) == fill
    assert calls


class _Parses:
    """A stand-in for `ShorterFills`: the first error inside the fill, `at_cut` errors after any cut."""

    def __init__(self, at_cut: int):
        self.at_cut = at_cut

    def first_error(self) -> int:
        return 1

    def errors(self, cut: int) -> int:
        return self.at_cut


def test_salvage_leaves_a_fill_alone_where_a_shorter_one_would_only_pair_quotes_differently():
    from types import SimpleNamespace

    from dg_lsp.syntax.fill_end import salvage_cut

    fill, spec = "a)\n    y = 2\n", object()
    code = 'def f():\n    """Doc."""\n    x = g('
    ctx = SimpleNamespace(prefix=code, suffix="\n")
    assert salvage_cut(fill, ctx, spec, lambda text, spec: 3, lambda *a: _Parses(0)) < len(fill)
    # A window that opens inside a docstring: its closing quotes have no opening ones before them.
    ctx = SimpleNamespace(prefix='the end of a docstring.\n    """\n' + code, suffix="\n")
    assert salvage_cut(fill, ctx, spec, lambda text, spec: 3, lambda *a: _Parses(0)) == len(fill)
