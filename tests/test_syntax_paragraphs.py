"""paragraph_at: the prose at the cursor in Markdown, comments, docstrings and plain text.

Each case gives the document with the cursor `<|>` and the expected range as `[[`...`]]`.
"""

from __future__ import annotations

import pytest

from dg_lsp.syntax import Paragraph, language_for, paragraph_at


def locate(source: str) -> tuple[str, int]:
    offset = source.index("<|>")
    return source.replace("<|>", ""), offset


def expected_range(source: str) -> tuple[int, int]:
    clean = source.replace("<|>", "")
    return clean.index("[["), clean.index("]]") - 2


def strip_brackets(source: str) -> str:
    return source.replace("[[", "").replace("]]", "")


CASES = [
    # (language, document with cursor and [[range]], kind, prefix, prose)
    ("python", "x = 1\n# [[First line of\n# the com<|>ment.]]\n#\n# Second para.\n", "line_comment", "# ", "First line of\nthe comment."),
    ("python", "x = 1\n    # [[indented <|>one\n    # two]]\n# three\n", "line_comment", "    # ", "indented one\ntwo"),
    ("python", "def f():\n    \"\"\"[[Summary line.\n\n    More <|>text here.]]\n    \"\"\"\n", "docstring", "    ", "Summary line.\n\nMore text here."),
    ("python", "class A:\n    '''[[One<|> liner.]]'''\n", "docstring", "    ", "One liner."),
    ("javascript", "/**\n * [[Adds two\n * numb<|>ers.]]\n */\nfunction add(a, b) {}\n", "block_comment", " * ", "Adds two\nnumbers."),
    ("typescript", "let x = 1; /* [[short <|>note]] */\n", "block_comment", "   ", "short note"),
    ("c", "/*\n   [[Plain block\n   comm<|>ent.]]\n*/\nint x;\n", "block_comment", "   ", "Plain block\ncomment."),
    ("rust", "/// [[Doc for\n/// the <|>function.]]\n// other\nfn f() {}\n", "line_comment", "/// ", "Doc for\nthe function."),
    ("rust", "//! [[Crate doc <|>here.]]\n// not the same marker\n", "line_comment", "//! ", "Crate doc here."),
    ("go", "// [[Package x does\n// things<|>.]]\npackage x\n", "line_comment", "// ", "Package x does\nthings."),
    ("java", "class A {\n    // [[Explain\n    // the <|>field.]]\n    int x;\n}\n", "line_comment", "    // ", "Explain\nthe field."),
    ("cpp", "int main() {\n  // [[Compute the\n  <|>// answer]]\n  return 42;\n}\n", "line_comment", "  // ", "Compute the\nanswer"),
    ("python", "x = 1\n# [[cursor at the end<|>]]\n", "line_comment", "# ", "cursor at the end"),
    ("markdown", "# Title\n\n[[First line\nsecond <|>line.]]\n\nNext para.\n", "markdown", "", "First line\nsecond line."),
    ("markdown", "- [[item one\n  conti<|>nues here]]\n- item two\n", "markdown", "  ", "item one\ncontinues here"),
    ("markdown", "> [[quoted\n> te<|>xt]]\n", "markdown", "> ", "quoted\ntext"),
    ("markdown", "[[Caf\u00e9 \U0001f600 e\u0301 na<|>\u0131ve]]\n", "markdown", "", "Caf\u00e9 \U0001f600 e\u0301 na\u0131ve"),
    (None, "[[Plain para\nline <|>two]]\n\nnext\n", "text", "", "Plain para\nline two"),
    (None, "-- [[sql comment\n-- more <|>here]]\nselect 1;\n", "line_comment", "-- ", "sql comment\nmore here"),
]


@pytest.mark.parametrize(("language", "source", "kind", "prefix", "prose"), CASES)
def test_paragraph_at(language: str | None, source: str, kind: str, prefix: str, prose: str) -> None:
    text, offset = locate(strip_brackets(source))
    start, end = expected_range(source)
    paragraph = paragraph_at(text, offset, language_for(language, None) if language else None)
    assert paragraph is not None
    assert (paragraph.start, paragraph.end) == (start, end)
    assert (paragraph.kind, paragraph.prefix, paragraph.prose) == (kind, prefix, prose)


NONE_CASES = [
    ("python", "x = 1<|>\n"),
    ("python", 's = "not a doc<|>string"\n'),
    ("python", "x = 1  # trailing <|>comment\n"),
    ("python", "# <|>\nx = 1\n"),
    ("python", "def f():\n    return 1\n<|>\n"),
    ("javascript", "const s = `templ<|>ate`;\n"),
    ("markdown", "# Ti<|>tle\n\npara\n"),
    ("markdown", "```py\nco<|>de\n```\n"),
    ("markdown", "text\n\n<|>\n\nmore\n"),
    (None, "a\n\n<|>\n\nb\n"),
]


@pytest.mark.parametrize(("language", "source"), NONE_CASES)
def test_no_paragraph(language: str | None, source: str) -> None:
    text, offset = locate(source)
    assert paragraph_at(text, offset, language_for(language, None) if language else None) is None


def test_rewrap_uses_the_continuation_prefix() -> None:
    paragraph = Paragraph(0, 0, "line_comment", "    # ", "#", "")
    wrapped = paragraph.rewrap("alpha beta gamma delta epsilon zeta eta theta iota kappa", width=30)
    lines = wrapped.split("\n")
    assert len(lines) > 1
    assert all(line.startswith("    # ") for line in lines[1:])
    assert not lines[0].startswith(" ")
    assert " ".join(line.removeprefix("    # ") for line in lines) == "alpha beta gamma delta epsilon zeta eta theta iota kappa"


def test_rewrapped_comment_replaces_the_range_cleanly() -> None:
    text = "def f():\n    # Old words that\n    # wrap badly.\n    return 1\n"
    offset = text.index("wrap")
    paragraph = paragraph_at(text, offset, language_for("python", None))
    new = paragraph.rewrap("New words that are long enough to need more than one line here.", width=40)
    result = text[: paragraph.start] + new + text[paragraph.end :]
    comment_lines = [line for line in result.splitlines() if line.strip().startswith("#")]
    assert len(comment_lines) >= 2
    assert all(line.startswith("    # ") and len(line) <= 40 for line in comment_lines)
    assert result.endswith("\n    return 1\n")


def test_out_of_range_offset_gives_none() -> None:
    assert paragraph_at("abc", 10, None) is None
