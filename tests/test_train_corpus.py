"""The optional test-suite corpus: more training code without leaking the held-out modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from dg_engine.train.corpus import HELD_OUT, SourceFile, held_out_names, list_sources, split, usable_test_file

GOOD = "import unittest\n\nclass T(unittest.TestCase):\n    def test_x(self):\n        self.assertEqual(1, 1)\n"


@pytest.fixture(scope="module")
def held():
    return held_out_names()


def test_held_out_names_come_from_every_held_out_path(held):
    assert {"fractions", "json", "encoder", "mock", "parser", "punycode"} <= held
    for name in HELD_OUT:
        stem = Path(name).stem.strip("_").split("_")[-1]
        assert stem in held, name


@pytest.mark.parametrize(
    "name",
    ["test/test_fractions.py", "test/test_json/test_dump.py", "unittest/test/testmock/testsentinel.py",
     "test/test_asyncio/test_locks.py", "test/test_http_cookies.py", "test/test_email/__init__.py"],
)
def test_tests_of_held_out_modules_are_left_out(held, name):
    assert not usable_test_file(SourceFile(name, GOOD), held)


def test_broken_and_python2_files_are_left_out(held):
    assert usable_test_file(SourceFile("test/test_ok.py", GOOD), held)
    assert not usable_test_file(SourceFile("test/badsyntax_x.py", "def f(:\n    pass\n"), held)
    assert not usable_test_file(SourceFile("lib2to3/tests/data/py2.py", "print 'hello'\n"), held)
    # A test that only uses a held-out module is kept, as library files that use one are.
    assert usable_test_file(SourceFile("test/test_other.py", "import textwrap\n" + GOOD), held)


def test_library_listing_excludes_tests_and_test_listing_has_only_tests():
    library = list_sources()
    tests = list_sources(tests=True)
    assert tests and not set(library) & set(tests)
    assert all({"test", "tests"} & set(Path(n).parts[:-1]) for n in tests)
    assert not any(n.startswith("idlelib/") or "site-packages" in n for n in tests)


def test_split_with_tests_adds_only_usable_tests_and_keeps_validation():
    train, val = split(limit=40)
    more, val_too = split(limit=40, with_tests=True)
    assert [f.name for f in val] == [f.name for f in val_too]
    assert [f.name for f in more[: len(train)]] == [f.name for f in train]
    added = more[len(train):]
    assert added and all(usable_test_file(f, held_out_names()) for f in added)


def test_real_tests_of_held_out_modules_are_listed_then_dropped():
    tests = list_sources(tests=True)
    for name in ("test/test_fractions.py", "test/test_textwrap.py", "test/test_heapq.py"):
        assert name in tests
        assert not usable_test_file(SourceFile(name, GOOD), held_out_names())
