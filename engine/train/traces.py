"""Edit traces: a file in three versions (before, with the user's first edit, with the edits it
implies), made from the corpus's own files for next-edit training and its benchmark.

Four kinds, each built with the standard library's `tokenize` and `ast` so that only real
identifiers, real calls and real imports are touched:

* rename: a local, a parameter, an attribute or a module-level name renamed at one or two of its
  uses; the other uses in its scope are the target;
* signature: a positional parameter added to or (when unused) removed from a `def`; the calls in
  the file are the target;
* sibling: one line of a run of lines with the same shape changed (a shared name replaced, or
  the right-hand side wrapped in a call); the other lines of the run are the target;
* import: a use inserted of a name whose import is missing (the import is the target), or the last
  use of an import deleted (removing the import is the target).

`dg_engine.train.edits` turns a trace into a training example.
"""

from __future__ import annotations

import ast
import io
import random
import re
import tokenize
from dataclasses import dataclass

from .augment import renameable

KINDS = ("rename", "signature", "sibling", "import")
# Calls a sibling line's right-hand side may be wrapped in.
WRAPPERS = ("str", "int", "float", "list", "tuple", "sorted", "repr", "bool", "len", "set")
MAX_FILE_CHARS = 60_000


@dataclass(frozen=True)
class Trace:
    kind: str
    before: str
    current: str
    after: str


Span = tuple[int, int, str]  # (start, end, replacement) character offsets


def apply_spans(text: str, spans: list[Span]) -> str:
    for start, end, new in sorted(spans, key=lambda s: s[0], reverse=True):
        text = text[:start] + new + text[end:]
    return text


class _Lines:
    """Maps ast/tokenize (line, column) pairs to character offsets."""

    def __init__(self, text: str):
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def chars(self, row: int, col: int) -> int:  # tokenize: 1-based row, character column
        return self.starts[row - 1] + col

    def utf8(self, row: int, col: int) -> int:  # ast: 1-based row, UTF-8 byte column
        return self.starts[row - 1] + len(self.lines[row - 1].encode()[:col].decode(errors="ignore"))

    def node(self, node: ast.AST) -> tuple[int, int]:
        return self.utf8(node.lineno, node.col_offset), self.utf8(node.end_lineno, node.end_col_offset)


def _new_name(pool: list[str], taken: set[str], rng: random.Random) -> str | None:
    return next((c for c in (rng.choice(pool) for _ in range(8)) if c not in taken), None) if pool else None


def _names(text: str) -> list[tokenize.TokenInfo]:
    """NAME tokens with the token before each (to tell `x` from `obj.x`)."""
    out, prev = [], None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME:
            out.append((tok, prev is not None and prev.string == "."))
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            prev = tok
    return out


def _scopes(tree: ast.Module) -> list[ast.AST]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def rename_trace(text: str, tree: ast.Module, rng: random.Random, pool: list[str]) -> Trace | None:
    names = [(t, dot) for t, dot in _names(text) if renameable(t.string)]
    if not names:
        return None
    tok, dot = rng.choice(names)
    # Scope: the innermost class (attributes) or function (other names) holding the pick, where
    # the name occurs again; else the module.
    kinds = (ast.ClassDef,) if dot else (ast.FunctionDef, ast.AsyncFunctionDef)
    row = tok.start[0]
    holders = [s for s in _scopes(tree) if isinstance(s, kinds) and s.lineno <= row <= s.end_lineno]
    scope = min(holders, key=lambda s: s.end_lineno - s.lineno, default=None)
    lo, hi = (scope.lineno, scope.end_lineno) if scope is not None else (1, len(text.splitlines()) + 1)
    uses = [t for t, d in names if t.string == tok.string and d == dot and lo <= t.start[0] <= hi]
    if len(uses) < 2:
        return None
    new = _new_name(pool, {t.string for t, _ in names}, rng)
    if new is None:
        return None
    at = _Lines(text)
    spans = [(at.chars(*t.start), at.chars(*t.end), new) for t in uses]
    first = 0 if rng.random() < 0.6 else rng.randrange(len(uses) - 1)
    edited = spans[first : first + (2 if rng.random() < 0.3 and first + 2 < len(uses) else 1)]
    return Trace("rename", text, apply_spans(text, edited), apply_spans(text, spans))


def _calls(tree: ast.Module, fn: ast.FunctionDef, method: bool) -> list[ast.Call]:
    def calls_fn(c: ast.Call) -> bool:
        f = c.func
        return isinstance(f, ast.Attribute) and f.attr == fn.name if method else isinstance(f, ast.Name) and f.id == fn.name

    return [c for c in ast.walk(tree) if isinstance(c, ast.Call) and calls_fn(c)
            and not any(isinstance(a, ast.Starred) for a in c.args)]


def _remove(at: _Lines, items: list[ast.AST], i: int) -> tuple[int, int]:
    """The span that removes item i of a comma-separated list, with one of its commas."""
    if i + 1 < len(items):
        return at.node(items[i])[0], at.node(items[i + 1])[0]
    if i > 0:
        return at.node(items[i - 1])[1], at.node(items[i])[1]
    return at.node(items[i])


def signature_trace(text: str, tree: ast.Module, rng: random.Random, pool: list[str]) -> Trace | None:
    fns = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    rng.shuffle(fns)
    at = _Lines(text)
    for fn in fns[:20]:
        a = fn.args
        if a.defaults or a.vararg or a.kwonlyargs or a.kwarg or a.posonlyargs:
            continue
        params = list(a.args)
        method = bool(params) and params[0].arg in ("self", "cls")
        own = params[1:] if method else params
        calls = [c for c in _calls(tree, fn, method) if len(c.args) == len(own) and not c.keywords]
        if not calls:
            continue
        used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
        removable = [i for i, p in enumerate(own) if p.arg not in used]
        if removable and rng.random() < 0.4:
            i = rng.choice(removable)
            j = i + (1 if method else 0)
            edit = [(*_remove(at, params, j), "")]
            targets = [(*_remove(at, c.args, i), "") for c in calls]
        else:
            new = _new_name(pool, {t.string for t, _ in _names(text)}, rng)
            if new is None:
                return None
            if params:
                edit = [(at.node(params[-1])[1], at.node(params[-1])[1], ", " + new)]
            else:
                line = text[at.starts[fn.lineno - 1] :]
                paren = at.starts[fn.lineno - 1] + line.find("(" ) + 1
                edit = [(paren, paren, new)]
            targets = []
            for c in calls:
                end = at.node(c.args[-1])[1] if c.args else at.node(c.func)[1] + 1
                targets.append((end, end, (", " if c.args else "") + new))
        current = apply_spans(text, edit)
        return Trace("signature", text, current, apply_spans(text, edit + targets))
    return None


# Identifiers outside string literals and comments (group 1); the other alternatives skip those.
IDENT = re.compile(r"'[^']*'|\"[^\"]*\"|#.*|([A-Za-z_]\w*)")
MAX_RUN = 12
SHAPE = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|'[^']*'|\"[^\"]*\"|\s+")
ASSIGN = re.compile(r"^(\s*[\w.\[\]'\"]+\s*=\s*)(.+?)(\s*)$")


def _shape(line: str) -> str:
    return SHAPE.sub(lambda m: "N" if m.group(0)[0].isalpha() or m.group(0)[0] == "_" else
                     ("" if m.group(0).isspace() else "L"), line.strip())


def sibling_trace(text: str, rng: random.Random, pool: list[str]) -> Trace | None:
    lines = text.splitlines(keepends=True)
    runs, i = [], 0
    while i < len(lines):
        j = i
        indent = len(lines[i]) - len(lines[i].lstrip())
        shape = _shape(lines[i])
        while (j + 1 < len(lines) and lines[j + 1].strip() and _shape(lines[j + 1]) == shape
               and len(lines[j + 1]) - len(lines[j + 1].lstrip()) == indent):
            j += 1
        if 2 <= j - i < MAX_RUN and "N" in shape and len(shape) > 3 and not shape.endswith(":"):
            runs.append((i, j + 1))
        i = j + 1
    if not runs:
        return None
    a, b = rng.choice(runs)
    run = lines[a:b]
    change = _shared_name_change(run, rng, pool, text) if rng.random() < 0.6 else None
    change = change or _wrap_change(run, rng)
    if change is None:
        return None
    new_run = [change(line) for line in run]
    k = 0 if rng.random() < 0.7 else rng.randrange(len(run))
    current = "".join(lines[:a] + run[:k] + [new_run[k]] + run[k + 1 :] + lines[b:])
    after = "".join(lines[:a] + new_run + lines[b:])
    return Trace("sibling", text, current, after)


def _shared_name_change(run: list[str], rng: random.Random, pool: list[str], text: str):
    """Replace the k-th identifier of every line where all lines share it."""
    idents = [_idents(line) for line in run]
    shared = [k for k, name in enumerate(idents[0]) if name not in ("self", "cls") and renameable(name)
              and all(len(ids) > k and ids[k] == name for ids in idents)]
    if not shared:
        return None
    k = rng.choice(shared)
    new = _new_name(pool, {m.group(1) for m in IDENT.finditer(text) if m.group(1)}, rng)
    if new is None:
        return None

    def change(line: str) -> str:
        m = [m for m in IDENT.finditer(line) if m.group(1)][k]
        return line[: m.start()] + new + line[m.end() :]

    return change


def _idents(line: str) -> list[str]:
    return [m.group(1) for m in IDENT.finditer(line) if m.group(1)]


def _wrap_change(run: list[str], rng: random.Random):
    """Wrap every line's right-hand side in the same call, for runs of simple assignments."""
    if not all(ASSIGN.match(line.rstrip("\r\n")) for line in run):
        return None
    if any(line.rstrip().endswith(("(", "[", "{", ",", "\\")) for line in run):
        return None
    fn = rng.choice(WRAPPERS)

    def change(line: str) -> str:
        body, newline = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")) :]
        lhs, rhs, space = ASSIGN.match(body).groups()
        return f"{lhs}{fn}({rhs}){space}{newline}"

    return change


def import_trace(text: str, tree: ast.Module, rng: random.Random) -> Trace | None:
    at = _Lines(text)
    loads: dict[str, list[ast.Name]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            loads.setdefault(n.id, []).append(n)
    bindings = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) and stmt.lineno == stmt.end_lineno:
            for k, alias in enumerate(stmt.names):
                name = alias.asname or alias.name.split(".")[0]
                if alias.name != "*" and loads.get(name):
                    bindings.append((stmt, k, name))
    if not bindings:
        return None
    stmt, k, name = rng.choice(bindings)
    if len(stmt.names) == 1:
        start = at.starts[stmt.lineno - 1]
        unimport = (start, at.starts[stmt.lineno], "")
    else:
        unimport = (*_remove(at, stmt.names, k), "")
    uses = sorted(loads[name], key=lambda n: n.lineno)
    use_line = uses[0].lineno
    drop_use = (at.starts[use_line - 1], at.starts[use_line], "")
    if use_line == stmt.lineno:
        return None
    if len(uses) == 1 and _deletable(tree, use_line) and rng.random() < 0.5:
        # The user deleted the last use; the import left unused is the target.
        current = apply_spans(text, [drop_use])
        return Trace("import", text, current, apply_spans(text, [drop_use, unimport]))
    # The user wrote a use of a name that is not imported; the import is the target.
    current = apply_spans(text, [unimport])
    return Trace("import", apply_spans(text, [unimport, drop_use]), current, text)


def _deletable(tree: ast.Module, line: int) -> bool:
    """Whether line `line` is one whole statement with siblings (deleting it leaves valid code)."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and len(body) > 1:
                if any(isinstance(s, ast.stmt) and s.lineno == s.end_lineno == line for s in body):
                    return True
    return False


def make_trace(text: str, kind: str, rng: random.Random, pool: list[str]) -> Trace | None:
    """One trace of `kind` from a file, or None when the file has nothing of that kind."""
    if len(text) > MAX_FILE_CHARS:
        return None
    try:
        tree = ast.parse(text)
        if kind == "rename":
            return rename_trace(text, tree, rng, pool)
        if kind == "signature":
            return signature_trace(text, tree, rng, pool)
        if kind == "sibling":
            return sibling_trace(text, rng, pool)
        return import_trace(text, tree, rng)
    except (SyntaxError, tokenize.TokenError, ValueError, IndentationError, IndexError):
        return None
