"""The edits an edit implies (dg_lsp/implied.py), shape by shape, without a model."""

from __future__ import annotations

from dg_engine.nextedit import line_hunks
from dg_lsp.edits import apply_edits
from dg_lsp.implied import implied_edits, scope, substitution


def implied(before: str, after: str) -> str:
    """`after` with the edits implied by the change from `before` applied."""
    [hunk] = line_hunks(before, after)
    return apply_edits(after, implied_edits(after, hunk))


def test_a_rename_reaches_the_other_uses_in_its_def_and_no_further():
    before = ("def area(w, h):\n    '''w is the width.'''\n    total = w * h  # w\n    return f(w=w)\n\n\n"
              "def other(w):\n    return w\n")
    after = before.replace("def area(w,", "def area(width,")
    assert implied(before, after) == (
        "def area(width, h):\n    '''w is the width.'''\n    total = width * h  # w\n    return f(width=width)\n\n\n"
        "def other(w):\n    return w\n")  # not in the docstring, the comment, or another function


def test_an_attribute_rename_reaches_its_class_and_a_top_level_name_the_whole_text():
    before = ("class A:\n    def f(self):\n        self.n = 1\n\n    def g(self):\n        return self.n + n\n\n\n"
              "class B:\n    def h(self):\n        return self.n\n")
    after = before.replace("self.n = 1", "self.count = 1")
    assert implied(before, after) == before.replace("self.n = 1", "self.count = 1").replace(
        "return self.n + n", "return self.count + n")
    before = "limit = 3\n\n\ndef f():\n    return limit\n"
    assert implied(before, before.replace("limit = 3", "cap = 3")) == "cap = 3\n\n\ndef f():\n    return cap\n"


def test_a_changed_line_in_a_run_of_its_shape_changes_its_siblings_only():
    before = "a.x = 1\na.y = 2\na.z = 3\nprint(a)\n"
    assert implied(before, before.replace("a.x = 1", "b.x = 1")) == "b.x = 1\nb.y = 2\nb.z = 3\nprint(a)\n"
    before = "x = a\ny = b\nz = c\n"
    assert implied(before, before.replace("x = a", "x = str(a)")) == "x = str(a)\ny = str(b)\nz = str(c)\n"
    # Two lines are no run: a lone changed assignment implies nothing.
    before = "x = a\ny = b\n"
    [hunk] = line_hunks(before, before.replace("x = a", "x = str(a)"))
    assert implied_edits(before.replace("x = a", "x = str(a)"), hunk) == []


def test_a_parameter_added_or_removed_reaches_the_calls():
    before = "def f(a, b):\n    return a\n\n\nf(1, g(2, 3))\nf(x,\n  y)\nf(1)\nf(a=1, b=2)\n"
    after = before.replace("def f(a, b):", "def f(a, b, c):")
    assert implied(before, after) == after.replace("f(1, g(2, 3))", "f(1, g(2, 3), c)").replace(
        "f(x,\n  y)", "f(x,\n  y, c)")  # not the call with another count, nor the one with keywords
    after = before.replace("def f(a, b):", "def f(a):")
    assert implied(before, after) == after.replace("f(1, g(2, 3))", "f(1)").replace("f(x,\n  y)", "f(x)")
    before = "class K:\n    def m(self, a):\n        pass\n\n\nK().m(1)\nm(1)\n"
    after = before.replace("def m(self, a):", "def m(self):")
    assert implied(before, after) == after.replace("K().m(1)", "K().m()")  # a method: `.m(` calls only


def test_the_last_use_of_an_import_deleted_takes_the_import_with_it():
    before = "import os\nimport sys\n\nprint(os.sep)\nprint(sys.argv)\n"
    after = before.replace("print(os.sep)\n", "")
    assert implied(before, after) == "import sys\n\nprint(sys.argv)\n"
    before = "from a import b, c, d\n\nb()\nc()\nd()\n"
    assert implied(before, before.replace("c()\n", "")) == "from a import b, d\n\nb()\nd()\n"
    before = "import os\n\nprint(os.sep)\nprint(os.name)\n"  # another use is left: nothing to do
    [hunk] = line_hunks(before, before.replace("print(os.sep)\n", ""))
    assert implied_edits(before.replace("print(os.sep)\n", ""), hunk) == []


def test_a_module_used_and_defined_nowhere_is_imported_in_sorted_place():
    before = "import os\nimport sys\n\n\ndef f():\n    return 1\n"
    after = before.replace("return 1", "x = json.dumps(1)\n    return 1")
    assert implied(before, after).startswith("import json\nimport os\nimport sys\n")
    after = before.replace("return 1", "x = zlib.crc32(b'')\n    return 1")
    assert implied(before, after).startswith("import os\nimport sys\nimport zlib\n")
    # A name the text defines (a parameter, an assignment) is no module to import.
    after = before.replace("def f():\n    return 1", "def f(cfg):\n    return 1").replace("return 1", "cfg.x\n    return 1")
    hunks = line_hunks(before.replace("def f():", "def f(cfg):"), after)
    assert implied_edits(after, hunks[-1]) == []


def test_the_shapes_are_read_exactly():
    assert substitution(("total = w * h",), ("total = width * h",)) == (0, 1, "w", "width")
    assert substitution(("f(w, w)",), ("f(x, x)",)) == (0, 1, "w", "x")  # one name, twice
    assert substitution(("f(w, v)",), ("f(x, y)",)) is None  # two names
    assert substitution(("x = 1",), ("x = 2",)) is None  # a literal, not a name
    assert substitution(("if a:",), ("elif a:",)) is None
    lines = ["class A:\n", "    def f(self):\n", "        x = 1\n", "\n", "        return x\n", "    y = 2\n"]
    assert scope(lines, 2) == range(1, 5) and scope(lines, 2, "class") == range(0, 6) and scope(lines, 1) == range(1, 5)
