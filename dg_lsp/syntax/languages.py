"""Registry of the languages the syntax layer understands.

Every other module in this package asks one question about a document's language: which grammar
parses it, and which rules (comment markers, block openers, node type names) apply to it.  Keeping
those facts in one table means that adding a language is a data change, and that callers which get
`None` back know to fall back to line-based logic.  Grammars are loaded lazily, on first use, so a
server that only ever sees Python never loads the C++ grammar.
"""

from __future__ import annotations

import functools
import importlib
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tree_sitter

#: The marker comment text that asks the server to fill the spot, unless the user configures another.
DEFAULT_MARKER = "TODO(dg)"


@functools.cache
def _load_language(module: str, attribute: str) -> tree_sitter.Language:
    """Load a grammar from its package; cached because a Language is immutable and costly to build."""
    import tree_sitter

    factory = getattr(importlib.import_module(module), attribute)
    return tree_sitter.Language(factory())


@dataclass(frozen=True)
class LanguageSpec:
    """What the syntax layer knows about one language.

    The node type sets name grammar nodes; they drive context cutting (`function_types`,
    `class_types`, `import_types`), body detection (`block_types`) and prose detection
    (`comment_types`, `string_types`).  The string rules (`block_openers`, `line_comments`, ...)
    drive the line-based heuristics that must keep working while the code does not parse.
    """

    name: str
    grammar: tuple[str, str]
    line_comments: tuple[str, ...] = ()
    block_comments: tuple[tuple[str, str], ...] = ()
    # A line whose code ends with one of these opens a block (Python ":"; brace languages "{").
    block_openers: tuple[str, ...] = ("{",)
    # A line that starts with one of these closes a block; empty for indentation-based languages.
    block_closers: tuple[str, ...] = ("}",)
    # Keywords that continue a compound statement at the same level (Python `else:`).
    continuation_keywords: tuple[str, ...] = ()
    # Regular expressions (full match, trailing ";" removed) for statements that stand in for a body.
    placeholders: tuple[str, ...] = ()
    marker: str = DEFAULT_MARKER
    default_indent: str = "    "
    function_types: frozenset[str] = frozenset()
    class_types: frozenset[str] = frozenset()
    block_types: frozenset[str] = frozenset()
    string_types: frozenset[str] = frozenset()
    comment_types: frozenset[str] = frozenset()
    import_types: frozenset[str] = frozenset()
    # Whether a string statement first in a body is documentation (Python docstrings).
    docstrings: bool = False

    @property
    def language(self) -> tree_sitter.Language:
        """The tree-sitter Language, loaded on first access."""
        return _load_language(*self.grammar)

    @property
    def offside(self) -> bool:
        """True for languages where indentation, not a closing token, ends a block."""
        return not self.block_closers

    @property
    def scope_types(self) -> frozenset[str]:
        """Node types whose signature is worth keeping in a cut prefix."""
        return self.function_types | self.class_types


_C_COMMENTS = {"line_comments": ("//",), "block_comments": (("/*", "*/"),)}

_JS_TYPES = {
    "function_types": frozenset(
        {
            "function_declaration",
            "function_expression",
            "arrow_function",
            "method_definition",
            "generator_function",
            "generator_function_declaration",
        }
    ),
    "class_types": frozenset({"class_declaration", "class"}),
    "block_types": frozenset({"statement_block", "class_body"}),
    "string_types": frozenset({"string", "template_string"}),
    "comment_types": frozenset({"comment"}),
    "import_types": frozenset({"import_statement"}),
}

_TS_TYPES = {
    **_JS_TYPES,
    "class_types": frozenset(
        {
            "class_declaration",
            "class",
            "abstract_class_declaration",
            "interface_declaration",
            "enum_declaration",
            "internal_module",
        }
    ),
    "block_types": frozenset({"statement_block", "class_body", "interface_body", "enum_body"}),
}

_C_TYPES = {
    "function_types": frozenset({"function_definition"}),
    "class_types": frozenset({"struct_specifier"}),
    "block_types": frozenset({"compound_statement", "field_declaration_list"}),
    "string_types": frozenset({"string_literal"}),
    "comment_types": frozenset({"comment"}),
    "import_types": frozenset({"preproc_include"}),
}

_SPECS: dict[str, LanguageSpec] = {
    spec.name: spec
    for spec in (
        LanguageSpec(
            name="python",
            grammar=("tree_sitter_python", "language"),
            line_comments=("#",),
            block_openers=(":",),
            block_closers=(),
            continuation_keywords=("elif", "else", "except", "finally"),
            placeholders=(r"\.\.\.", r"pass"),
            function_types=frozenset({"function_definition"}),
            class_types=frozenset({"class_definition"}),
            block_types=frozenset({"block"}),
            string_types=frozenset({"string", "concatenated_string"}),
            comment_types=frozenset({"comment"}),
            import_types=frozenset(
                {"import_statement", "import_from_statement", "future_import_statement"}
            ),
            docstrings=True,
        ),
        LanguageSpec(
            name="javascript",
            grammar=("tree_sitter_javascript", "language"),
            default_indent="  ",
            **_C_COMMENTS,
            **_JS_TYPES,
        ),
        LanguageSpec(
            name="typescript",
            grammar=("tree_sitter_typescript", "language_typescript"),
            default_indent="  ",
            **_C_COMMENTS,
            **_TS_TYPES,
        ),
        LanguageSpec(
            name="tsx",
            grammar=("tree_sitter_typescript", "language_tsx"),
            default_indent="  ",
            **_C_COMMENTS,
            **_TS_TYPES,
        ),
        LanguageSpec(
            name="rust",
            grammar=("tree_sitter_rust", "language"),
            placeholders=(r"(?:todo|unimplemented)!\s*(?:\(.*\)|\[.*\]|\{.*\})",),
            function_types=frozenset({"function_item", "closure_expression"}),
            class_types=frozenset(
                {"impl_item", "trait_item", "struct_item", "enum_item", "mod_item"}
            ),
            block_types=frozenset({"block", "declaration_list", "field_declaration_list"}),
            string_types=frozenset({"string_literal", "raw_string_literal"}),
            comment_types=frozenset({"line_comment", "block_comment"}),
            import_types=frozenset({"use_declaration", "extern_crate_declaration"}),
            **_C_COMMENTS,
        ),
        LanguageSpec(
            name="go",
            grammar=("tree_sitter_go", "language"),
            default_indent="\t",
            function_types=frozenset({"function_declaration", "method_declaration", "func_literal"}),
            block_types=frozenset({"block"}),
            string_types=frozenset({"interpreted_string_literal", "raw_string_literal"}),
            comment_types=frozenset({"comment"}),
            import_types=frozenset({"package_clause", "import_declaration"}),
            **_C_COMMENTS,
        ),
        LanguageSpec(
            name="c",
            grammar=("tree_sitter_c", "language"),
            **_C_COMMENTS,
            **_C_TYPES,
        ),
        LanguageSpec(
            name="cpp",
            grammar=("tree_sitter_cpp", "language"),
            **_C_COMMENTS,
            **{
                **_C_TYPES,
                "function_types": frozenset({"function_definition", "lambda_expression"}),
                "class_types": frozenset(
                    {"class_specifier", "struct_specifier", "namespace_definition"}
                ),
                "block_types": frozenset(
                    {"compound_statement", "field_declaration_list", "declaration_list"}
                ),
                "string_types": frozenset({"string_literal", "raw_string_literal"}),
                "import_types": frozenset({"preproc_include", "using_declaration"}),
            },
        ),
        LanguageSpec(
            name="java",
            grammar=("tree_sitter_java", "language"),
            function_types=frozenset(
                {"method_declaration", "constructor_declaration", "lambda_expression"}
            ),
            class_types=frozenset(
                {
                    "class_declaration",
                    "interface_declaration",
                    "enum_declaration",
                    "record_declaration",
                }
            ),
            block_types=frozenset(
                {"block", "class_body", "constructor_body", "interface_body", "enum_body"}
            ),
            string_types=frozenset({"string_literal"}),
            comment_types=frozenset({"line_comment", "block_comment"}),
            import_types=frozenset({"package_declaration", "import_declaration"}),
            **_C_COMMENTS,
        ),
        LanguageSpec(
            name="markdown",
            grammar=("tree_sitter_markdown", "language"),
            block_comments=(("<!--", "-->"),),
            block_openers=(),
            block_closers=(),
            default_indent="  ",
        ),
    )
}

# LSP languageIds that name a grammar directly or through a close relative.
_LANGUAGE_IDS: dict[str, str] = {
    "python": "python",
    "javascript": "javascript",
    "javascriptreact": "javascript",
    "typescript": "typescript",
    "typescriptreact": "tsx",
    "rust": "rust",
    "go": "go",
    "c": "c",
    "cpp": "cpp",
    "java": "java",
    "markdown": "markdown",
}

_EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".pyw": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".rs": "rust",
    ".go": "go",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".c++": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".java": "java",
    ".md": "markdown",
    ".markdown": "markdown",
}


def spec_named(name: str) -> LanguageSpec | None:
    """The spec registered under its internal name (e.g. "tsx"), or None."""
    return _SPECS.get(name)


def supported_language_ids() -> tuple[str, ...]:
    """The LSP languageIds with a grammar, for advertising and for tests."""
    return tuple(_LANGUAGE_IDS)


def language_for(language_id: str | None, path: str | None) -> LanguageSpec | None:
    """The spec for a document, by LSP languageId first and by file extension second.

    The languageId wins because clients know it better than a file name (an untitled buffer has
    none); the extension is the fallback for ids we do not recognise.  `path` may be a file path or
    a URI: only the text after the last "/" matters.  Unknown languages give None.
    """
    if language_id:
        name = _LANGUAGE_IDS.get(language_id.lower())
        if name is not None:
            return _SPECS[name]
    if path:
        base = posixpath.basename(path.replace("\\", "/").split("?", 1)[0])
        extension = posixpath.splitext(base)[1].lower()
        name = _EXTENSIONS.get(extension)
        if name is not None:
            return _SPECS[name]
    return None
