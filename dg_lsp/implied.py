"""The edits an edit implies, read off the edit itself: candidates for the model to judge.

A next-edit suggestion has two halves: what to propose and whether to show it. The embedded model
is too small to write the other uses of a renamed name by itself (benchmarks/results/next_edit.json:
none of its free rewrites of held-out traces was right), but most of what an edit implies follows
from the edit's own shape, and the model can still judge a proposal in context. So the proposal
comes from here and the verdict from the model (`next_edit.suggest` seeds the canvas with the
proposal and shows the edits the model keeps, at the confidence it keeps them with).

The shapes, for a Python-like text, all on the latest hunk:

* one identifier replaced on one line (`w` -> `width`): inside a run of lines of the same shape
  that share the identifier, the siblings get it; otherwise its other uses in the enclosing `def`
  (a `.name` in the enclosing `class`; a top-level name in the whole text);
* a right-hand side wrapped in a call (`x = a` -> `x = f(a)`): the sibling assignments get it;
* a `def` line that gained a last parameter or lost one: the calls in the text with the old number
  of arguments gain the new name as their last argument, or lose the matching argument;
* the last use of an imported name deleted: the import goes (the whole line, or the name);
* a line that uses `name.attr` where `name` is defined nowhere: `import name` joins the imports.

Edits are (start, end, new text) offsets into the current text, never inside the latest hunk.
"""

from __future__ import annotations

import keyword
import re

from dg_engine.nextedit import Hunk

Edit = tuple[int, int, str]

# Identifiers outside strings and comments (group 1); the other alternatives only skip text.
IDENT = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|#.*|([A-Za-z_]\w*)")
SHAPE = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|'[^']*'|\"[^\"]*\"|\s+")
ASSIGN = re.compile(r"^(\s*[\w.\[\]'\"]+\s*=\s*)(.+?)(\s*)$")
DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(")
SCOPE = re.compile(r"^(\s*)(?:async\s+def|def|class)\b")
PLAIN_IMPORT = re.compile(r"^import\s+([\w.]+)\s*$")
IMPORT = re.compile(r"^(?:import\s+(?P<plain>.+?)|from\s+\S+\s+import\s+(?P<names>[^()#]+?))\s*$")
TRIPLE = re.compile(r'(?s)("""|\'\'\')(.*?)(\1|\Z)')
KEYWORDS = frozenset(keyword.kwlist) | {"self", "cls"}  # never a name an edit renames or imports


def mask_docstrings(text: str) -> str:
    """`text` with the insides of triple-quoted strings blanked (newlines kept): prose is no use."""
    return TRIPLE.sub(lambda m: m.group(1) + re.sub(r"[^\n]", " ", m.group(2)) + m.group(3), text)


def idents(line: str) -> list[re.Match]:
    return [m for m in IDENT.finditer(line) if m.group(1)]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _shape(line: str) -> str:
    """Names as N, literals as L, spaces dropped: lines of one shape differ only in names and literals."""
    return SHAPE.sub(lambda m: "N" if m.group(0)[0].isalpha() or m.group(0)[0] == "_" else
                     ("" if m.group(0).isspace() else "L"), line.strip())


def _skeleton(line: str) -> str:
    return IDENT.sub(lambda m: "N" if m.group(1) else m.group(0), line)


def substitution(before: tuple[str, ...], after: tuple[str, ...]) -> tuple[int, int, str, str] | None:
    """(j, k, old, new) when `after` is `before` with one identifier replaced by another wherever it
    changed (the k-th identifier of line j is the first place), else None."""
    pairs, first = set(), None
    for j, (x, y) in enumerate(zip(before, after)):
        a, b = idents(x), idents(y)
        if len(a) != len(b):
            return None
        if _skeleton(x) != _skeleton(y):
            return None  # something besides identifiers changed
        for k, (p, q) in enumerate(zip(a, b)):
            if p.group(1) != q.group(1):
                pairs.add((p.group(1), q.group(1)))
                first = first or (j, k)
    if len(pairs) != 1 or first is None:
        return None
    old, new = pairs.pop()
    return (*first, old, new) if old not in KEYWORDS and new not in KEYWORDS else None


def _run(lines: list[str], at: int, shape: str, indent: int) -> range:
    """The lines around `at` that have `shape` and `indent` (`at` itself counts as one of them)."""
    def same(i: int) -> bool:
        return lines[i].strip() != "" and _indent(lines[i]) == indent and _shape(lines[i]) == shape

    lo, hi = at, at + 1
    while lo > 0 and same(lo - 1):
        lo -= 1
    while hi < len(lines) and same(hi):
        hi += 1
    return range(lo, hi)


def scope(lines: list[str], at: int, kind: str = "def") -> range:
    """The lines of the innermost `def` (or `class`) holding line `at`; all lines at top level."""
    want = ("class",) if kind == "class" else ("def", "async")

    def opens(i: int) -> bool:
        return SCOPE.match(lines[i]) is not None and lines[i].split()[0] in want

    head, level = (at if opens(at) else None), _indent(lines[at])
    for i in range(at - 1, -1, -1) if head is None else ():
        if lines[i].strip() and _indent(lines[i]) < level:
            if opens(i):
                head = i
                break
            level = _indent(lines[i])
    if head is None:
        return range(0, len(lines))
    end = head + 1
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > _indent(lines[head])):
        end += 1
    return range(head, end)


def _starts(lines: list[str]) -> list[int]:
    out = [0]
    for line in lines:
        out.append(out[-1] + len(line))
    return out


def _rename(lines: list[str], starts: list[int], hunk: Hunk, j: int, k: int, old: str, new: str) -> list[Edit]:
    line = lines[hunk.line_after + j]
    dotted = line[: idents(line)[k].start()].rstrip().endswith(".")
    body = scope(lines, hunk.line_after + j, "class" if dotted else "def")
    edits = []
    for i in body:
        if i in hunk.new_lines:
            continue
        for m in idents(lines[i]):
            if m.group(1) == old and lines[i][: m.start()].rstrip().endswith(".") == dotted:
                edits.append((starts[i] + m.start(1), starts[i] + m.end(1), new))
    return edits


def _siblings(lines: list[str], starts: list[int], hunk: Hunk, change) -> list[Edit]:
    """`change(line) -> new line or None` applied to the run the edited line belonged to."""
    at, before = hunk.line_after, hunk.before[0]
    shape = _shape(before)
    if "N" not in shape or shape.endswith(":"):
        return []
    others = [i for i in _run(lines[:at] + [before] + lines[at + 1:], at, shape, _indent(before)) if i != at]
    if len(others) < 2:  # a run is three lines or more
        return []
    edits = []
    for i in others:
        changed = change(lines[i].rstrip("\r\n"))
        if changed is not None and changed != lines[i].rstrip("\r\n"):
            edits.append((starts[i], starts[i] + len(lines[i].rstrip("\r\n")), changed))
    return edits


def _replace_ident(k: int, old: str, new: str):
    def change(line: str) -> str | None:
        ms = idents(line)
        if len(ms) <= k or ms[k].group(1) != old:
            return None
        return line[: ms[k].start(1)] + new + line[ms[k].end(1):]
    return change


def _wrapper(before: str, after: str):
    """The call `after` wraps `before`'s right-hand side in, as a change for sibling lines."""
    a, b = ASSIGN.match(before), ASSIGN.match(after)
    if not a or not b or a.group(1) != b.group(1):
        return None
    m = re.fullmatch(r"([\w.]+)\((.*)\)", b.group(2))
    if m is None or m.group(2) != a.group(2):
        return None

    def change(line: str) -> str | None:
        s = ASSIGN.match(line)
        return None if s is None else f"{s.group(1)}{m.group(1)}({s.group(2)}){s.group(3)}"
    return change


def split_args(text: str, open_at: int) -> tuple[list[tuple[int, int]], int] | None:
    """The top-level argument spans of the call whose `(` is at `open_at`, and its `)` offset."""
    depth, quote, spans, start, i = 0, "", [], open_at + 1, open_at
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                if text[start:i].strip():
                    spans.append(_trim(text, start, i))
                return spans, i
        elif ch == "," and depth == 1:
            spans.append(_trim(text, start, i))
            start = i + 1
        i += 1
    return None


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    piece = text[a:b]
    return a + len(piece) - len(piece.lstrip()), b - len(piece) + len(piece.rstrip())


def _params(line: str) -> list[str] | None:
    m = DEF.match(line)
    if m is None:
        return None
    found = split_args(line, m.end() - 1)
    if found is None:
        return None
    return [line[a:b].strip() for a, b in found[0]]


def _signature(text: str, lines: list[str], starts: list[int], hunk: Hunk) -> list[Edit]:
    before, after = _params(hunk.before[0]), _params(hunk.after[0])
    name = DEF.match(hunk.after[0])
    if before is None or after is None or name is None or name.group(2) != DEF.match(hunk.before[0]).group(2):
        return []
    method = bool(after) and after[0] in ("self", "cls")
    own = len(before) - (1 if method else 0)
    added = after[:-1] == before and re.fullmatch(r"[A-Za-z_]\w*", after[-1] or "") is not None
    removed = [i for i in range(len(before)) if before[:i] + before[i + 1:] == after]
    if not added and not removed:
        return []
    call = re.compile((r"\.{}\(" if method else r"(?<![\w.]){}\(").format(re.escape(name.group(2))))
    skip = range(starts[hunk.line_after], starts[hunk.line_after + 1])
    edits = []
    for m in call.finditer(text):
        if m.start() in skip or re.search(r"\bdef\s*$", text[max(0, m.start() - 8):m.start()]):
            continue
        found = split_args(text, m.end() - 1)
        if found is None or len(found[0]) != own:
            continue
        spans, close = found
        if any("=" in text[a:b] or text[a:b].strip().startswith("*") for a, b in spans):
            continue  # keywords or unpacking: which argument is which is not positional
        if added:
            at = spans[-1][1] if spans else close
            edits.append((at, at, (", " if spans else "") + after[-1]))
        else:
            i = removed[0] - (1 if method else 0)
            if i < 0:
                continue
            a, b = spans[i]
            if len(spans) == 1:
                edits.append((a, b, ""))
            elif i + 1 < len(spans):
                edits.append((a, spans[i + 1][0], ""))  # the argument and the comma after it
            else:
                edits.append((spans[i - 1][1], b, ""))  # the comma before the last argument, and it
    return sorted(edits)


def _imports(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if IMPORT.match(line.rstrip("\r\n"))]


def _used(lines: list[str], name: str, skip: set[int]) -> bool:
    return any(m.group(1) == name for i, line in enumerate(lines) if i not in skip for m in idents(line))


def _unimport(lines: list[str], starts: list[int], name: str) -> list[Edit]:
    """Removing `name` from the import that binds it: the line, or the name in the line's list."""
    for i in _imports(lines):
        m = IMPORT.match(lines[i].rstrip("\r\n"))
        listed = m.group("plain") or m.group("names")
        items = [p.strip() for p in listed.split(",")]
        bound = [(p.split(" as ")[-1].strip() if " as " in p else p.split(".")[0]) for p in items]
        if name not in bound:
            continue
        if len(items) == 1:
            return [(starts[i], starts[i + 1] if i + 1 < len(starts) else starts[i] + len(lines[i]), "")]
        base = starts[i] + m.start("plain" if m.group("plain") else "names")
        pieces = [(base + a, base + b) for a, b in _comma_spans(listed)]
        k = bound.index(name)
        a, b = (pieces[k][0], pieces[k + 1][0]) if k + 1 < len(pieces) else (pieces[k - 1][1], pieces[k][1])
        return [(a, b, "")]
    return []


def _comma_spans(text: str) -> list[tuple[int, int]]:
    """Each item of a comma-separated list as its span without the surrounding spaces."""
    out, start = [], 0
    for part in text.split(","):
        lead = len(part) - len(part.lstrip())
        out.append((start + lead, start + len(part.rstrip())))
        start += len(part) + 1
    return out


def _defined(lines: list[str], name: str) -> bool:
    pattern = re.compile(rf"\b(?:def|class)\s+{re.escape(name)}\b|\b{re.escape(name)}\s*(?:,[^=]*)?=(?!=)|"
                         rf"\bimport\b.*\b{re.escape(name)}\b|\bas\s+{re.escape(name)}\b|\bfor\s+{re.escape(name)}\b")
    return any(pattern.search(line) for line in lines)


def _import_for(lines: list[str], starts: list[int], hunk: Hunk) -> list[Edit]:
    """`import name` for a module-like name the new lines use and nothing defines."""
    used = {m.group(1) for line in hunk.after for m in re.finditer(r"(?<![\w.])([A-Za-z_]\w*)\.[A-Za-z_]", line)}
    others = [line for i, line in enumerate(lines) if i not in hunk.new_lines]
    missing = sorted(n for n in used - KEYWORDS if not _defined(others, n) and not _defined(list(hunk.after), n)
                     and not re.search(rf"\bdef\s+\w+\s*\([^)]*\b{re.escape(n)}\b", "".join(lines)))
    plain = [i for i in _imports(lines) if PLAIN_IMPORT.match(lines[i].rstrip("\r\n")) and not lines[i][0].isspace()]
    if len(missing) != 1 or not plain:
        return []
    name = missing[0]
    # Before the first plain import that sorts after it, else after the last: most files keep
    # their imports about sorted.
    later = [i for i in plain if PLAIN_IMPORT.match(lines[i].rstrip("\r\n")).group(1) > name]
    at = later[0] if later else plain[-1] + 1
    return [(starts[at], starts[at], f"import {name}\n")]


def implied_edits(text: str, hunk: Hunk | None) -> list[Edit]:
    """The edits the latest hunk implies, in document order; [] when its shape is none of the above."""
    if hunk is None:
        return []
    text = mask_docstrings(text)  # same offsets; nothing inside a docstring is proposed
    lines = text.splitlines(keepends=True)
    starts = _starts(lines)
    if hunk.before and len(hunk.before) == len(hunk.after) and hunk.line_after + len(hunk.after) <= len(lines):
        if any(lines[hunk.line_after + j].rstrip("\r\n") != a for j, a in enumerate(hunk.after)):
            return []  # an edit inside a docstring implies no change to the code
        if len(hunk.after) == 1 and DEF.match(hunk.after[0]):
            found = _signature(text, lines, starts, hunk)
            if found:
                return found
        sub = substitution(hunk.before, hunk.after)
        if sub is not None:
            j, k, old, new = sub
            siblings = _siblings(lines, starts, hunk, _replace_ident(k, old, new)) if len(hunk.after) == 1 else []
            return siblings or _rename(lines, starts, hunk, j, k, old, new)
        wrap = _wrapper(hunk.before[0], hunk.after[0]) if len(hunk.after) == 1 else None
        return _siblings(lines, starts, hunk, wrap) if wrap is not None else []
    if hunk.before and not hunk.after:  # lines deleted: an import left without a use goes too
        gone = {m.group(1) for line in hunk.before for m in idents(line)} - KEYWORDS
        imports = set(_imports(lines))
        dead = [n for n in sorted(gone) if not _used(lines, n, imports) and _unimport(lines, starts, n)]
        return _unimport(lines, starts, dead[0]) if len(dead) == 1 else []
    if hunk.after and not hunk.before:
        return _import_for(lines, starts, hunk)
    return []
