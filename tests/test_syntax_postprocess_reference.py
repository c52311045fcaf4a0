"""Post-processing leaves a correct fill alone: regression cases from the quality benchmark.

The benchmark's reference row sends the true middle of each hole through the server's
post-processing; every case here is a hole of that shape (cut from a held-out standard-library
module or from HumanEval-Infilling, shortened to the lines that matter) that an earlier rule
damaged.  Each must come back unchanged, so a rule that cuts or re-indents too eagerly fails here.
"""

from __future__ import annotations

import pytest

from dg_lsp.syntax import Budget, extract_context, language_for, postprocess

CASES = {
    # (a) column 0 of an empty line: the model writes the line's indentation itself, and the lines
    # after the first keep their place relative to it (unittest/mock.py, _patch.copy).
    "col0_multiline_bracket": (
        "class _patch:\n    def copy(self):\n        patcher = _patch(\n            self.getter, self.new,\n"
        "        )\n        patcher.attribute_name = self.attribute_name\n<|>\n\n"
        "    def __call__(self, func):\n        return func\n",
        "        patcher.additional_patchers = [\n            p.copy() for p in self.additional_patchers\n"
        "        ]\n        return patcher",
    ),
    # (a) ... and a line deeper than the neighbours' guess stays there (HumanEval/8, line 5).
    "col0_deeper_than_guess": (
        "def sum_product(numbers):\n    sum_value = 0\n    prod_value = 1\n\n    for n in numbers:\n"
        "        sum_value += n\n<|>\n    return sum_value, prod_value\n",
        "        prod_value *= n",
    ),
    # (b) an `else:` branch inside the hole, back at the hole's block level (fractions.py, __round__).
    "else_inside_hole": (
        "class Fraction:\n    def __round__(self, ndigits=None):\n        if ndigits is None:\n"
        "            floor, remainder = divmod(self.numerator, self.denominator)\n"
        "            if remainder * 2 < self.denominator:\n                return floor\n"
        "            # Deal with the half case:\n            elif floor % 2 == 0:\n<|>\n"
        "        shift = 10**abs(ndigits)\n        return shift\n",
        "                return floor\n            else:\n                return floor + 1",
    ),
    # (b) the hole runs to the header of the next method, whose body is the suffix (asyncio/queues.py).
    "next_method_header": (
        "class PriorityQueue(Queue):\n    def _init(self, maxsize):\n        <|>\n"
        "        return heappop(self._queue)\n",
        "self._queue = []\n\n    def _put(self, item, heappush=heapq.heappush):\n"
        "        heappush(self._queue, item)\n\n    def _get(self, heappop=heapq.heappop):",
    ),
    # (b) at the end of the file the hole closes a nested function and returns it (json/encoder.py).
    "eof_back_to_outer_level": (
        "def _make_iterencode(markers):\n    def _iterencode(o):\n        if markers is not None:\n"
        "            markerid = id(o)\n        yield o\n        if markers is not None:\n<|>\n",
        "            del markers[markerid]\n    return _iterencode",
    ),
    # (c) a span from mid-line to mid-line, several statements long (HumanEval/8, random span 3).
    "span_across_statements": (
        "def sum_product(numbers):\n    sum_value = 0\n    prod_value = 1\n    for n in numbers:\n"
        "        sum_va<|>, prod_value\n",
        "lue += n\n        prod_value *= n\n    return sum_value",
    ),
    # (c) a span whose first line happens to end like the rest of the hole line (HumanEval/4, 10).
    "span_first_line_ends_like_rest": (
        "def mad(numbers):\n    mean =<|>bers) / len(numbers)\n",
        " sum(numbers) / len(numbers)\n    return sum(abs(x - mean) for x in num",
    ),
    # (c) the span ends inside the next line's indentation; its last line is only spaces (difflib).
    "span_ends_in_indentation": (
        'def ratio(self):\n    """Return a measure.\n\n    >>> s = SequenceMatcher(None, "abcd", "bcde")\n'
        '    >>><|>       >>> s.quick_ratio()\n    0.75\n    """\n',
        " s.ratio()\n    0.75\n ",
    ),
    # A span of nothing but indentation before the code of its line (HumanEval/2, random span 4).
    "span_of_indentation": (
        "def truncate_number(number: float) -> float:\n<|>return number % 1.0\n",
        "    ",
    ),
    # A span that ends inside a call's arguments, before the closer (HumanEval/136, random span 2).
    "span_ends_before_closer": (
        "def f(lst):\n    smallest = list(filter(lambda x: x < 0, lst))\n"
        "    largest = list(filter(l<|>) if smallest else None, min(largest) if largest else None)\n",
        "ambda x: x > 0, lst))\n    return (max(smallest",
    ),
    # The end of the span repeats the start of the rest of the line but is an operator the fill
    # needs: `n =` before `= 1:` makes `n == 1:` (HumanEval/55, random span 6).
    "overlap_is_an_operator": (
        "def fib(n):\n    if n == 0:\n <|>= 1:\n        return 1\n    return fib(n - 1) + fib(n - 2)\n",
        "       return 0\n    if n =",
    ),
    # A rest-of-line span that goes on to an `except:` whose body is the suffix (smtplib.py).
    "rest_of_line_to_handler": (
        "def local_hostname():\n    try:\n        addr = gethostbyname(geth<|>\n        pass\n"
        "    return addr\n",
        "ostname())\n    except OSError:",
    ),
    # A hole on a blank line inside indentation that the model finishes (HumanEval/75, span 1).
    "finishes_indentation": (
        "def is_prime(n):\n    for j in range(2, n):\n   <|>\n    return True\n",
        "     if n % j == 0:\n            return False",
    ),
    # Prose in a docstring dedents as it likes (textwrap.py, TextWrapper's docstring).
    "docstring_prose": (
        'class TextWrapper:\n    """\n    Options:\n      fix_sentence_endings (default: false)\n'
        "        <|>\n        Break words longer than 'width'.\n    \"\"\"\n",
        "Ensure that sentence-ending punctuation is always followed\n        by two spaces.\n"
        "      break_long_words (default: true)",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_middle_comes_back_unchanged(name: str) -> None:
    document, middle = CASES[name]
    start = document.index("<|>")
    text = document.replace("<|>", "")
    spec = language_for("python", None)
    ctx = extract_context(text, start, start, spec, Budget(), len)
    assert postprocess(middle, ctx, spec) == middle
