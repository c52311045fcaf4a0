"""Where the text a model sees around a hole begins and ends.

The window before and after the hole is cut to a token budget on a line boundary, preferably one
where a sibling statement begins or ends. The cuts move in strides of lines while the user types
at the hole, so that the prompt, and with it the engine's prefix cache, stays the same for many
keystrokes: a window that moved at every line would re-encode itself at every line.
"""

from __future__ import annotations

from collections.abc import Callable

from .lines import after_line, line_start

# No tokenizer turns more than this many characters into one token; used to bound the search.
_MAX_CHARS_PER_TOKEN = 32
# Cuts move in steps of this many lines while the user types (`_stable_start`): a window up to
# this many lines short of its budget, against a prompt that stays the same for many keystrokes.
CUT_STRIDE_LINES = 16


class TokenCounter:
    """Memoises token counts of document slices, since the cut search asks for some twice."""

    def __init__(self, text: str, count: Callable[[str], int]) -> None:
        self._text = text
        self._count = count
        self._cache: dict[tuple[int, int], int] = {}

    def __call__(self, start: int, end: int) -> int:
        key = (start, end)
        if key not in self._cache:
            self._cache[key] = self._count(self._text[start:end]) if end > start else 0
        return self._cache[key]


def _line_starts(text: str, low: int, high: int) -> list[int]:
    """Starts of the lines beginning in [low, high], ascending."""
    starts = [0] if low == 0 else []
    position = text.find("\n", max(low - 1, 0))
    while position != -1 and position + 1 <= high:
        if position + 1 >= low:
            starts.append(position + 1)
        position = text.find("\n", position + 1)
    return starts


def _line_ends(text: str, low: int, high: int) -> list[int]:
    """Offsets just past each newline in [low, high], plus len(text) when in range, ascending."""
    ends = []
    position = text.find("\n", max(low - 1, 0))
    while position != -1 and position + 1 <= high:
        if position + 1 >= low:
            ends.append(position + 1)
        position = text.find("\n", position + 1)
    if low <= len(text) <= high and (not ends or ends[-1] != len(text)):
        ends.append(len(text))
    return ends


def _fitting_start(candidates: list[int], start: int, limit: int, count: TokenCounter) -> int:
    """The smallest candidate c (ascending list) with count(c, start) <= limit; else the last one."""
    low, high = 0, len(candidates) - 1
    best = candidates[-1]
    while low <= high:
        middle = (low + high) // 2
        if count(candidates[middle], start) <= limit:
            best, high = candidates[middle], middle - 1
        else:
            low = middle + 1
    return best


def _fitting_end(candidates: list[int], end: int, limit: int, count: TokenCounter) -> int:
    """The largest candidate e (ascending list) with count(end, e) <= limit; else the first one."""
    low, high = 0, len(candidates) - 1
    best = candidates[0]
    while low <= high:
        middle = (low + high) // 2
        if count(end, candidates[middle]) <= limit:
            best, low = candidates[middle], middle + 1
        else:
            high = middle - 1
    return best


def cut_prefix(
    text: str, start: int, syntactic: set[int] | None, limit: int, count: TokenCounter
) -> int:
    """Where the kept prefix begins: a syntactic boundary if that keeps enough, else a line start.

    The cut sits on the first stable line (`_stable_start`) at or after the earliest line that
    fits, so typing at the hole moves it once every `CUT_STRIDE_LINES` lines, not at every line.
    """
    floor = line_start(text, start)
    window = max(0, start - limit * _MAX_CHARS_PER_TOKEN)
    lines = _line_starts(text, window, floor)
    if not lines or lines[-1] != floor:
        lines.append(floor)
    if lines[0] == 0 and count(0, start) <= limit:
        return 0
    tightest = _fitting_start(lines, start, limit, count)
    stable = _stable_start(text, lines, tightest)
    if count(stable, start) * 2 < limit:  # very long lines: the stride would cost half the budget
        stable = tightest
    if syntactic is not None:
        chosen = min((c for c in syntactic if stable <= c <= floor), default=floor)
        # A syntactic cut that throws away more than half the budget loses too much context.
        if count(chosen, start) * 2 >= limit:
            return chosen
    return stable


def cut_suffix(text: str, end: int, syntactic: set[int] | None, limit: int, count: TokenCounter) -> int:
    """Where the kept suffix ends, by the same rules as `cut_prefix` (`_stable_end`)."""
    ceiling = after_line(text, end)
    window = min(len(text), end + limit * _MAX_CHARS_PER_TOKEN)
    lines = [e for e in _line_ends(text, ceiling, window) if e >= ceiling] or [ceiling]
    if lines[0] != ceiling:
        lines.insert(0, ceiling)
    if lines[-1] == len(text) and count(end, len(text)) <= limit:
        return len(text)
    widest = _fitting_end(lines, end, limit, count)
    stable = _stable_end(text, lines, widest)
    if count(end, stable) * 2 < limit:
        stable = widest
    if syntactic is not None:
        chosen = max((c for c in syntactic if ceiling <= c <= stable), default=ceiling)
        if count(end, chosen) * 2 >= limit:
            return chosen
    return stable


def _stable_start(text: str, lines: list[int], tightest: int) -> int:
    """The first of `lines` (consecutive line starts) at or after `tightest` whose line number is a
    multiple of `CUT_STRIDE_LINES`; the last line when none is.

    Typing at the hole changes no line number before it, so the engine's prefix cache, which is
    reused up to the first token that differs, keeps the whole window between strides instead of
    re-encoding it (in 300-line files, one keystroke in twelve re-encoded ~1,500 tokens).
    """
    for line in lines[lines.index(tightest):]:
        if text.count("\n", 0, line) % CUT_STRIDE_LINES == 0:
            return line
    return lines[-1]


def _stable_end(text: str, lines: list[int], widest: int) -> int:
    """The last of `lines` (consecutive line ends) at or before `widest` with a multiple of
    `CUT_STRIDE_LINES` lines after it, counted from the end, which typing at the hole leaves alone;
    the first line when none is. The suffix comes first in a suffix-first prompt, so a suffix that
    moved would cost re-encoding the prefix too."""
    for line in reversed(lines[: lines.index(widest) + 1]):
        if text.count("\n", line) % CUT_STRIDE_LINES == 0:
            return line
    return lines[0]
