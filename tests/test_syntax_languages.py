"""The language registry: ids and extensions map to the right grammar, names match the grammars."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from dg_lsp.syntax import DEFAULT_MARKER, language_for, supported_language_ids
from dg_lsp.syntax.languages import spec_named
from dg_lsp.syntax.tree import parse

ID_CASES = [
    ("python", "python"),
    ("javascript", "javascript"),
    ("javascriptreact", "javascript"),
    ("typescript", "typescript"),
    ("typescriptreact", "tsx"),
    ("rust", "rust"),
    ("go", "go"),
    ("c", "c"),
    ("cpp", "cpp"),
    ("java", "java"),
    ("markdown", "markdown"),
]

PATH_CASES = [
    ("/src/app.py", "python"),
    ("stubs/mod.pyi", "python"),
    ("file:///home/me/web/index.mjs", "javascript"),
    ("C:\\proj\\ui\\View.jsx", "javascript"),
    ("a/b.ts", "typescript"),
    ("a/b.TSX", "tsx"),
    ("src/main.rs", "rust"),
    ("cmd/main.go", "go"),
    ("lib/x.h", "c"),
    ("lib/x.c", "c"),
    ("lib/x.hpp", "cpp"),
    ("lib/x.cc", "cpp"),
    ("Main.java", "java"),
    ("README.md", "markdown"),
    ("notes.markdown", "markdown"),
]


@pytest.mark.parametrize(("language_id", "name"), ID_CASES)
def test_language_ids(language_id: str, name: str) -> None:
    spec = language_for(language_id, None)
    assert spec is not None and spec.name == name


@pytest.mark.parametrize(("path", "name"), PATH_CASES)
def test_extensions(path: str, name: str) -> None:
    spec = language_for(None, path)
    assert spec is not None and spec.name == name


def test_language_id_wins_over_extension() -> None:
    assert language_for("rust", "/x/y.py").name == "rust"


def test_unknown_id_falls_back_to_extension() -> None:
    assert language_for("plaintext", "/x/y.go").name == "go"


@pytest.mark.parametrize(
    ("language_id", "path"),
    [(None, None), ("plaintext", None), ("haskell", "Main.hs"), (None, "Makefile"), ("", "")],
)
def test_unknown_languages_give_none(language_id: str | None, path: str | None) -> None:
    assert language_for(language_id, path) is None


def test_supported_ids_cover_the_brief() -> None:
    assert set(supported_language_ids()) == {language_id for language_id, _ in ID_CASES}


@pytest.mark.parametrize(
    ("name", "comments", "openers"),
    [
        ("python", ("#",), (":",)),
        ("javascript", ("//",), ("{",)),
        ("rust", ("//",), ("{",)),
        ("go", ("//",), ("{",)),
        ("java", ("//",), ("{",)),
    ],
)
def test_comment_and_block_rules(name: str, comments: tuple[str, ...], openers: tuple[str, ...]) -> None:
    spec = spec_named(name)
    assert spec.line_comments == comments
    assert spec.block_openers == openers
    assert spec.marker == DEFAULT_MARKER == "TODO(dg)"


def test_python_is_offside_and_braces_are_not() -> None:
    assert spec_named("python").offside
    assert not spec_named("c").offside


@pytest.mark.parametrize("name", ["python", "javascript", "typescript", "tsx", "rust", "go", "c", "cpp", "java", "markdown"])
def test_node_type_names_exist_in_grammar(name: str) -> None:
    """A misspelt node type would silently disable a feature, so every name must be in the grammar."""
    spec = spec_named(name)
    language = spec.language
    kinds = {language.node_kind_for_id(i) for i in range(language.node_kind_count)}
    declared = (
        spec.function_types
        | spec.class_types
        | spec.block_types
        | spec.string_types
        | spec.comment_types
        | spec.import_types
    )
    assert declared <= kinds, declared - kinds


@pytest.mark.parametrize(
    ("language_id", "source"),
    [
        ("python", "def f(x):\n    return x\n"),
        ("javascriptreact", "const A = () => <div>{x}</div>;\n"),
        ("typescriptreact", "const A = (p: P) => <div>{p.x}</div>;\n"),
        ("typescript", "let x: number = 1;\n"),
        ("rust", "fn main() { println!(\"hi\"); }\n"),
        ("go", "package main\nfunc main() {}\n"),
        ("c", "int main(void) { return 0; }\n"),
        ("cpp", "template <class T> T id(T x) { return x; }\n"),
        ("java", "class A { void m() {} }\n"),
        ("markdown", "# Title\n\nSome *text*.\n"),
    ],
)
def test_each_grammar_parses_valid_code_without_errors(language_id: str, source: str) -> None:
    tree = parse(source, language_for(language_id, None))
    assert not tree.root_node.has_error


def test_grammars_load_lazily() -> None:
    """Importing the package must not load any grammar module (nor the LSP or model stacks).

    The subprocess stubs the parent `dg_lsp` package so that only this package's imports count.
    """
    package_dir = pathlib.Path(__file__).resolve().parent.parent / "dg_lsp"
    code = (
        "import sys, types\n"
        f"parent = types.ModuleType('dg_lsp'); parent.__path__ = [{str(package_dir)!r}]\n"
        "sys.modules['dg_lsp'] = parent\n"
        "import dg_lsp.syntax as s\n"
        "bad = [m for m in sys.modules if m.startswith(('tree_sitter_', 'lsprotocol', 'pygls', 'torch', 'dg_engine'))]\n"
        "assert not bad, bad\n"
        "s.language_for('go', None).language\n"
        "assert 'tree_sitter_go' in sys.modules and 'tree_sitter_rust' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
