"""English prose from the documentation the sdists ship, with the markup taken out.

The paragraph-rewrite feature needs plain English paragraphs of the kind developers write about
code. The reStructuredText and Markdown sources under `docs/`, READMEs and change logs are such
text, but full of markup that is not prose: directives and their options, code and literal
blocks, tables, heading underlines, roles (:func:`x`), link syntax, HTML. Those are removed or
reduced to their visible text here, line by line, and paragraphs that are then still mostly
symbols (API listings, version tables) are dropped. The rules are heuristics tuned to leave
sentences intact rather than to render documents faithfully.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import PurePosixPath

from .filters import decode, vendored

PROSE_SUFFIXES = (".rst", ".md", ".txt")
TEST_FOLDERS = frozenset({"test", "tests", "testing", "test-data", "test_data", "testdata"})
DOC_FOLDERS = frozenset({"doc", "docs", "documentation", "userguide", "user_guide", "guide"})
# `.txt` is read only in documentation folders or under these names: elsewhere it is data.
PROSE_NAMES = re.compile(
    r"(readme|changes|changelog|history|news|whatsnew|release|contributing|install)", re.I
)
LICENCE_NAMES = re.compile(
    r"^(licen[cs]e|copying|notice|copyright|authors|contributors|thanks|patents)", re.I
)
NOT_PROSE_NAMES = re.compile(
    r"^(requirements|constraints|cmakelists|sources|top_level|entry_points|dependency_links)", re.I
)
MAX_PROSE_BYTES = 1_000_000
# Change logs and release notes are prose too, but terse and numerous (django and numpy ship one
# file per release): each is cut at MAX_CHANGELOG_CHARS, and a source keeps them only up to
# CHANGELOG_BUDGET_CHARS in all, so that they stay about a fifth of the prose.
MAX_CHANGELOG_CHARS = 100_000
CHANGELOG_BUDGET_CHARS = 200_000
MIN_LETTER_SHARE = 0.6
MIN_WORDS = 5
MIN_DOCUMENT_CHARS = 200

# Directives whose body is code, data, a table or a list of names: dropped with their body. Every
# other directive (admonitions, API descriptions such as `.. function::`, glossaries) keeps its
# body, which is read as text again; its argument (a signature, a title) is dropped.
CODE_DIRECTIVES = frozenset(
    {
        "code", "code-block", "sourcecode", "literalinclude", "include", "highlight", "parsed-literal",
        "literal", "doctest", "testcode", "testoutput", "testsetup", "testcleanup", "ipython",
        "jupyter-execute", "code-cell", "plot", "bokeh-plot", "exec", "math", "raw", "image",
        "figure", "toctree", "autosummary", "contents", "sectnum", "index", "meta", "csv-table",
        "list-table", "table", "tabularcolumns", "productionlist", "graphviz", "graph", "digraph",
        "inheritance-diagram", "mermaid", "program-output", "command-output",
        "role", "default-role", "currentmodule", "module", "automodule", "autoclass", "autofunction",
        "automethod", "autoattribute", "autodata", "autoexception", "autoprogram", "argparse",
        "click", "jinja", "only", "ifconfig", "tab-set-code", "nbplot", "altair-plot", "minigallery",
        "header", "footer", "data-file", "doxygenfunction", "doxygenclass", "list", "hlist",
    }
)
# Directives whose argument is itself a sentence.
TEXT_ARGUMENT = frozenset(
    {"note", "warning", "tip", "hint", "important", "attention", "caution", "danger", "error", "seealso"}
)
VERSION_DIRECTIVES = frozenset({"versionadded", "versionchanged", "deprecated", "versionremoved"})
_DIRECTIVE = re.compile(r"^(\s*)\.\.\s+([\w:.+-]+)::(.*)$")
_EXPLICIT = re.compile(r"^(\s*)\.\.(\s|$)")  # comments, targets, footnotes, substitutions
_ADORNMENT = re.compile(r"^\s*([=\-~^\"'`#*+<>_:.!$%&,;?@\\/|])\1{2,}\s*$")
_SIMPLE_TABLE = re.compile(r"^\s*=+(\s+=+)+\s*$")
_GRID_TABLE = re.compile(r"^\s*(\+[-=+]+\+?|\|.*\|)\s*$")
_FIELD = re.compile(r"^\s*:[\w .()-]+:(\s|$)")
_BULLET = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)]|#\.|\(?[a-zA-Z0-9]\))\s+")
_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}(\s|$)")
_MD_FENCE = re.compile(r"^\s*(```|~~~)")
_MD_TABLE = re.compile(r"^\s*\|.*\||^\s*:?-{3,}:?\s*\|")
_MD_LINK_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+")
_PROMPT = re.compile(r"^\s*(>>>|In \[\d*\]:)")
_TEMPLATE = re.compile(r"^\s*(\{%|\{\{)")


def is_prose_candidate(path: str) -> bool:
    """Whether an archive member is documentation whose prose should be extracted."""
    pure = PurePosixPath(path)
    name = pure.name
    if not name.lower().endswith(PROSE_SUFFIXES) or NOT_PROSE_NAMES.match(name):
        return False
    folders = [part.lower() for part in pure.parts[:-1]]
    # Metadata folders, hidden folders (.github templates) and test fixtures are not documentation.
    if any(part.endswith((".dist-info", ".egg-info")) or part.startswith(".") for part in folders):
        return False
    if any(part in TEST_FOLDERS for part in folders):
        return False
    if name.lower().endswith(".txt"):
        in_docs = any(part in DOC_FOLDERS for part in folders)
        return in_docs or PROSE_NAMES.match(name) is not None
    return True


def licence_text(path: str) -> str | None:
    """`licence_text` for LICENSE, COPYING, AUTHORS and the like: legal boilerplate or name lists."""
    pure = PurePosixPath(path)
    if LICENCE_NAMES.match(pure.name) or any(p.lower() in {"licenses", "licences"} for p in pure.parts[:-1]):
        return "licence_text"
    return None


def is_changelog(path: str) -> bool:
    """Change logs and release notes, which are limited in size (see CHANGELOG_BUDGET_CHARS)."""
    lowered = path.lower()
    words = ("changelog", "changes", "history", "news", "whatsnew", "whats-new", "whats_new", "release")
    return any(word in lowered for word in words)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _role_text(content: str) -> str:
    """`Title <target>` -> Title; `~a.b.c` -> c; `!x` -> x: what a role shows when rendered."""
    content = content.strip()
    match = re.fullmatch(r"(.*?)\s*<([^<>]*)>", content, re.S)
    if match:
        content = match[1] or match[2]
    if content.startswith("~"):
        content = content[1:].rsplit(".", 1)[-1]
    return content.lstrip("!")


def inline(text: str) -> str:
    """Reduce inline markup (rst and Markdown) to the text a reader would see."""
    text = re.sub(r"(?::[\w:+.-]+:|\{[\w:+.-]+\})`([^`]*)`", lambda m: _role_text(m[1]), text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)  # images
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)  # [text](url)
    text = re.sub(r"\[([^\]]+)\]\[[^\]]*\]", r"\1", text)  # [text][ref]
    text = re.sub(r"``([^`]+)``", r"\1", text)
    text = re.sub(r"`([^`]*?)\s*<[^<>`]*>`__?", lambda m: m[1], text)  # `text <url>`_
    text = re.sub(r"`([^`]+)`(?:__?)?", r"\1", text)
    text = re.sub(r"\s?\[(?:#\w*|\*|\d+|\w+)\]_", "", text)  # footnote and citation references
    text = re.sub(r"(?<!\S)([A-Za-z][\w-]*[A-Za-z0-9])__?(?=[\s.,;:!?)]|$)", r"\1", text)  # word_
    text = re.sub(r"\|([^|\s][^|]*?)\|_?", r"\1", text)  # |substitution|
    text = re.sub(r"<(?:https?://|mailto:)[^>]+>", "", text)
    text = re.sub(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>", "", text)  # html tags
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"\1", text)
    text = re.sub(r"(?<!\w)__([^_]+ [^_]+)__(?!\w)", r"\1", text)
    text = re.sub(r"(?<!\w)_([^_\s][^_]*?)_(?!\w)", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def _skip_block(lines: list[str], i: int, indent: int) -> int:
    """Index of the first line after the block indented deeper than `indent` that starts at i."""
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > indent):
        i += 1
    return i


def _front_matter(lines: list[str]) -> int:
    """Lines taken by YAML/TOML front matter at the top of a document (0 when there is none)."""
    if lines and lines[0].strip() in ("---", "+++"):
        for i in range(1, min(len(lines), 200)):
            if lines[i].strip() == lines[0].strip():
                return i + 1
    return 0


def block_lines(text: str, markdown: bool) -> list[str]:
    """The document's lines with block-level markup removed; blank lines separate paragraphs."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    lines = text.split("\n")
    out: list[str] = []
    i = _front_matter(lines)
    previous_blank = True
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        i += 1
        if not stripped:
            out.append("")
            previous_blank = True
            continue
        blank_before, previous_blank = previous_blank, False
        if markdown and _MD_FENCE.match(line):
            fence = _MD_FENCE.match(line)[1]
            while i < len(lines) and not lines[i].strip().startswith(fence):
                i += 1
            i += 1
            continue
        indented = line.startswith(("    ", "\t"))
        if markdown and blank_before and indented and not _BULLET.match(line):
            i = _skip_block(lines, i, 3)  # indented code block
            continue
        directive = None if markdown else _DIRECTIVE.match(line)
        if directive:
            indent, name = len(directive[1]), directive[2].lower().rsplit(":", 1)[-1]
            end = _skip_block(lines, i, indent)
            if name not in CODE_DIRECTIVES and not name.startswith("auto"):
                argument = directive[3].strip()
                if name in VERSION_DIRECTIVES:  # `.. versionadded:: 1.2 The text.`
                    argument = argument.split(" ", 1)[1] if " " in argument else ""
                elif name not in TEXT_ARGUMENT:
                    argument = ""
                body = textwrap.dedent("\n".join(b for b in lines[i:end] if not _FIELD.match(b)))
                out.extend([argument, *block_lines(body, markdown=False), ""])
            i = end
            continue
        if not markdown and _EXPLICIT.match(line):
            i = _skip_block(lines, i, _indent(line))
            continue
        if _ADORNMENT.match(line):
            if out and out[-1] and i >= 2 and lines[i - 2].strip() == out[-1].strip():
                out.pop()  # the heading's title line
            continue
        if _SIMPLE_TABLE.match(line):
            # The table ends at a border line followed by a blank line (or the end).
            while i < len(lines):
                closing = _SIMPLE_TABLE.match(lines[i]) and (i + 1 == len(lines) or not lines[i + 1].strip())
                i += 1
                if closing:
                    break
            continue
        if _GRID_TABLE.match(line) or (markdown and _MD_TABLE.match(line)) or _TEMPLATE.match(line):
            continue
        prompt = _PROMPT.match(line)
        if prompt or (markdown and _MD_HEADING.match(line)) or _FIELD.match(line):
            if prompt:  # an interactive session runs until the next blank line
                while i < len(lines) and lines[i].strip():
                    i += 1
            continue
        if markdown and _MD_LINK_DEF.match(line):
            continue
        if markdown:
            line = re.sub(r"^\s*(>\s*)+", "", line)
        if not markdown and stripped.endswith("::"):
            # A literal block follows: keep the sentence that introduces it, drop the block.
            kept = stripped[:-2].rstrip()
            if kept:
                out.append(kept + ("" if stripped.endswith(" ::") else ":"))
            i = _skip_block(lines, i, _indent(line))
            out.append("")
            continue
        out.append(_BULLET.sub("", line, count=1))
    return out


def paragraphs(lines: list[str]) -> list[str]:
    """Paragraphs (runs of non-blank lines), inline markup removed, symbol-heavy ones dropped."""
    kept, current = [], []
    for line in [*lines, ""]:
        if line.strip():
            current.append(line.strip())
            continue
        if current:
            paragraph = inline(" ".join(current))
            letters = sum(c.isalpha() for c in paragraph)
            visible = sum(not c.isspace() for c in paragraph)
            if visible and letters / visible >= MIN_LETTER_SHARE and len(paragraph.split()) >= MIN_WORDS:
                kept.append(paragraph)
            current = []
    return kept


def clean(text: str, path: str) -> str:
    """The prose of one documentation file: paragraphs separated by a blank line."""
    markdown = path.lower().endswith(".md")
    result = "\n\n".join(paragraphs(block_lines(text.replace("\r\n", "\n"), markdown)))
    if is_changelog(path) and len(result) > MAX_CHANGELOG_CHARS:
        result = result[: result.rfind("\n\n", 0, MAX_CHANGELOG_CHARS)]
    return result


def prose_file_rule(path: str, size: int, data: bytes | None) -> tuple[str | None, str | None]:
    """(rule that drops the file or None, its prose when it is kept) for a documentation member."""
    rule = vendored(path) or licence_text(path)
    if rule:
        return rule, None
    if size > MAX_PROSE_BYTES or data is None:
        return "too_large", None
    text = decode(data)
    if text is None:
        return "not_utf8", None
    prose = clean(text, path)
    if len(prose) < MIN_DOCUMENT_CHARS:
        return "no_prose", None
    return None, prose
