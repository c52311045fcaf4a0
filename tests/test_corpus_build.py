"""The training-corpus builder: each rule on its own, then a whole build of tiny fake archives.

No network: the archives are tar.gz files made here, the stdlib is a small fake root, and the
build runs with `skip_download` and one worker.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import tarfile
import zipfile
from email.message import Message
from pathlib import Path

import pytest

from dg_engine.train import corpus, corpus_build
from dg_engine.train.corpus_build import REPO_ROOT, build, main
from dg_engine.train.dedup import Deduplicator, signature
from dg_engine.train.documents import Document, default_cache_dir, iter_documents, write_documents
from dg_engine.train.fetch import Pin, archive_matches, iter_members, parse_lock, read_lock
from dg_engine.train.filters import (
    generated,
    licence_of,
    literal_table,
    long_lines,
    parse,
    python_file_rule,
    spdx_permissive,
    vendored,
)
from dg_engine.train.pkginfo_backend import dist_info_name, prepare_metadata_for_build_wheel
from dg_engine.train.prose import clean, is_prose_candidate, licence_text, prose_file_rule


def module(prefix: str, count: int = 40, start: int = 0) -> str:
    """A plausible Python module whose words depend on `prefix`, long enough for shingles."""
    parts = [f'"""Helpers of the {prefix} package."""\n']
    for i in range(start, start + count):
        parts.append(
            f"def {prefix}_step_{i}(alpha, beta):\n"
            f'    """Combine alpha and beta for {prefix} stage {i}."""\n'
            f"    total = alpha * {i} + beta\n"
            f"    return total - {i * 3} if total > {i} else {prefix}_step_{i}(beta, alpha)\n"
        )
    return "\n\n".join(parts)


def renamed(text: str, old: str, new: str, times: int) -> str:
    return text.replace(old, new, times)


RST = """\
Getting started
===============

.. _intro-label:

This guide shows how to call :func:`fakepkg.core.run` and :class:`~fakepkg.models.Model`
with a small example; see `the website <https://example.org>`_ and ``run()`` for details.

.. code-block:: python

    import fakepkg
    fakepkg.secret_code_line()

Here is a literal block::

    hidden_literal_line = 1

.. note:: Notes are prose and their text stays in the document for the rewrite feature.

.. list-table::
   :header-rows: 1

   * - tablecellone
     - tablecelltwo

+-----------+-----------+
| gridcella | gridcellb |
+-----------+-----------+

>>> interactive_prompt_line()
42

A second paragraph with enough plain words to count as real prose for the tests here.
"""

MD = """\
---
title: front matter title
---
# Heading line

Markdown **prose** with a [link text](https://example.org) and `inline code` stays readable here.

```python
fenced_code_line()
```

| col | col |
|-----|-----|
| mdtablecell | x |

<div align="center">Centered words inside an html block are still prose for this test.</div>

A last paragraph of plain English words, so that the document keeps enough prose to be written.
"""


def release_notes(version: str) -> str:
    """A short change log page in rst whose sentences depend on the version."""
    items = "\n".join(
        f"- Fixed problem number {i} that version {version} users reported in detail." for i in range(8)
    )
    return f"Version {version}\n===========\n\n{items}\n"


def sdist(path: Path, top: str, pkg_info: str, files: dict[str, str]) -> Path:
    """Write a tar.gz sdist with `top/PKG-INFO` and the given members."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text in {"PKG-INFO": pkg_info, **files}.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def metadata(**fields: str | list[str]) -> Message:
    message = Message()
    for key, value in fields.items():
        for item in value if isinstance(value, list) else [value]:
            message[key.replace("_", "-")] = item
    return message


# --- the lock file and the archives -----------------------------------------------------------


def test_lock_pins_exactly_the_listed_distributions() -> None:
    names = [p.name for p in read_lock()]
    assert names == [
        "sympy", "numpy", "scipy", "pandas", "scikit-learn", "matplotlib", "networkx", "django",
        "sqlalchemy", "torch", "transformers", "twisted", "tornado", "astropy", "statsmodels", "dask",
        "sphinx", "docutils", "babel", "pyparsing", "mypy", "black", "ipython", "jedi", "parso",
        "aiohttp", "pytest", "xarray", "numba", "bokeh", "pillow", "fonttools", "pygments", "celery",
        "scrapy", "pydantic", "starlette", "rich", "textual", "pyyaml", "boto3", "botocore",
    ]
    pins = {p.name: p for p in read_lock()}
    assert pins["torch"] == Pin("torch", "2.13.0", wheel=True)
    assert pins["transformers"].version.startswith("5.23.")
    assert sum(p.wheel for p in pins.values()) == 1


def test_parse_lock_and_archive_names() -> None:
    pins = parse_lock("# comment\nfoo==1.0\n\nBar_Baz==2.0 wheel  # why\n")
    assert pins == [Pin("foo", "1.0"), Pin("Bar_Baz", "2.0", True)]
    with pytest.raises(ValueError):
        parse_lock("foo>=1.0\n")
    torch = Pin("torch", "2.13.0", True)
    assert archive_matches("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", torch)
    assert not archive_matches("torch-2.13.0.tar.gz", torch)
    assert archive_matches("scikit_learn-1.9.1.tar.gz", Pin("scikit-learn", "1.9.1"))
    assert not archive_matches("scikit_learn-1.9.0.tar.gz", Pin("scikit-learn", "1.9.1"))


def test_archives_are_read_with_relative_paths(tmp_path: Path) -> None:
    tar = sdist(tmp_path / "a-1.tar.gz", "a-1", "Name: a\n", {"a/x.py": "x = 1\n"})
    members = [(p, d) for p, _, d in iter_members(tar, lambda p, s: True)]
    assert members == [("PKG-INFO", b"Name: a\n"), ("a/x.py", b"x = 1\n")]
    wheel = tmp_path / "a-1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("a/x.py", "x = 1\n")
        zf.writestr("a-1.dist-info/METADATA", "Name: a\n")
    read = [(p, d is not None) for p, _, d in iter_members(wheel, lambda p, s: p.endswith(".py"))]
    assert read == [("a/x.py", True), ("a-1.dist-info/METADATA", False)]


def test_metadata_only_backend_copies_pkg_info(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg_info = "Metadata-Version: 2.1\nName: Foo.Bar\nVersion: 1.2\n"
    assert dist_info_name(pkg_info) == "foo_bar-1.2.dist-info"
    (tmp_path / "PKG-INFO").write_text(pkg_info)
    monkeypatch.chdir(tmp_path)
    name = prepare_metadata_for_build_wheel(str(tmp_path / "meta"))
    assert (tmp_path / "meta" / name / "METADATA").read_text() == pkg_info


# --- per-file rules -------------------------------------------------------------------------


def test_vendored_folders_are_dropped() -> None:
    assert vendored("pip/_vendor/six.py") == "vendored"
    assert vendored("astropy/extern/ply/lex.py") == "vendored"
    assert vendored("sklearn/externals/array_api_compat/common.py") == "vendored"
    assert vendored("pkg/third_party/x.py") == "vendored"
    assert vendored("vendored-meson/meson/mesonbuild/build.py") == "vendored"
    assert vendored("subprojects/highs/setup.py") == "vendored"
    assert vendored("pkg/vendor.py") is None  # a module named so is the project's own
    assert vendored("django/contrib/admin/options.py") is None


def test_generated_and_minified_files_are_dropped() -> None:
    assert python_file_rule("m.py", 10, b"x = [" + b"1, " * 600 + b"]\n")[0] == "long_lines"
    assert long_lines("x = 1\n" * 10) is None
    assert generated("# Generated by the protocol buffer compiler.  DO NOT EDIT!\nx = 1\n") == "generated"
    assert generated('"""This file is automatically generated."""\n') == "generated"
    # "generated by" in a docstring's prose is not a marker
    assert generated('"""A tree can be generated by passing a flag."""\n') is None
    table = "TABLE = [\n" + "".join(f"    '{i:08d}', {i * 7},\n" for i in range(2000)) + "]\n"
    assert literal_table(parse(table), table) == "literal_table"
    code = module("plain", 200)
    assert len(code) > 20_000 and literal_table(parse(code), code) is None
    assert python_file_rule("big.py", 600_000, None)[0] == "too_large"
    assert python_file_rule("py2.py", 20, b"print 'hello'\n")[0] == "syntax_error"
    assert python_file_rule("latin.py", 20, b"x = '\xe9'\n")[0] == "not_utf8"
    assert python_file_rule("ok.py", 20, b"x = 1\r\n") == (None, "x = 1\n")


def test_exact_duplicates_are_dropped() -> None:
    dedup = Deduplicator()
    text = module("alpha")
    assert dedup.check("a:one.py", signature(text)) is None
    spaced = text.replace("\n", "   \n\n")  # trailing spaces and blank lines do not make it new
    assert dedup.check("a:two.py", signature(spaced)) == "exact_duplicate"


def test_near_duplicates_are_dropped_and_similar_files_kept() -> None:
    dedup = Deduplicator()
    original = module("model", 60)
    assert dedup.check("t:models/bert.py", signature(original)) is None
    copied = renamed(original, "model_step_3(", "bert_step_3(", 2)
    assert dedup.check("t:models/roberta.py", signature(copied)) == "near_duplicate"
    half = module("model", 30) + "\n\n" + module("other", 30, start=30)
    assert dedup.check("t:similar.py", signature(half)) is None


# --- licences -------------------------------------------------------------------------------


def test_non_permissive_licences_are_dropped_and_permissive_kept() -> None:
    assert licence_of(metadata(License_Expression="MIT")).permissive
    torch_like = "Apache-2.0 WITH LLVM-exception AND BSD-3-Clause"
    assert licence_of(metadata(License_Expression=torch_like)).permissive
    assert licence_of(metadata(License_Expression="GPL-3.0-or-later OR MIT")).permissive
    assert not licence_of(metadata(License_Expression="GPL-3.0-or-later")).permissive
    assert not licence_of(metadata(License_Expression="MIT AND LGPL-2.1-only")).permissive
    assert not licence_of(metadata(License_Expression="MPL-2.0")).permissive
    assert licence_of(metadata(License="BSD")).permissive
    assert licence_of(metadata(License="Apache 2.0 License")).permissive
    long_bsd = (
        "Copyright (c) 2001, Someone\nAll rights reserved.\n\n"
        "Redistribution and use in source and binary forms..."
    )
    assert licence_of(metadata(License=long_bsd)).name == "BSD (licence text)"
    assert not licence_of(metadata(License="GNU General Public License v3\nlong text")).permissive
    gpl = metadata(Classifier=["License :: OSI Approved :: GNU General Public License v3 (GPLv3)"])
    assert not licence_of(gpl).permissive
    mit = metadata(License="UNKNOWN", Classifier=["License :: OSI Approved :: MIT License"])
    assert licence_of(mit).permissive and licence_of(mit).source == "Classifier"
    assert not licence_of(metadata()).permissive
    assert spdx_permissive("(MIT") is None


# --- prose ----------------------------------------------------------------------------------


def test_prose_markup_is_stripped() -> None:
    rst = clean(RST, "docs/intro.rst")
    assert "This guide shows how to call fakepkg.core.run and Model with a small example" in rst
    assert "see the website and run() for details" in rst
    assert "Here is a literal block:" in rst
    assert "Notes are prose and their text stays" in rst
    assert "A second paragraph with enough plain words" in rst
    for noise in ("secret_code_line", "hidden_literal_line", "tablecell", "gridcell", "interactive_prompt",
                  "Getting started", "::", ":func:", "`", "..", "intro-label", "https://"):
        assert noise not in rst, noise
    md = clean(MD, "README.md")
    assert "Markdown prose with a link text and inline code stays readable here." in md
    assert "Centered words inside an html block are still prose" in md
    for noise in ("front matter", "Heading line", "fenced_code_line", "mdtablecell", "<div", "**"):
        assert noise not in md, noise
    assert is_prose_candidate("docs/topics/db/queries.txt") and is_prose_candidate("README.md")
    assert not is_prose_candidate("pkg/tests/data/words.txt") and not is_prose_candidate("requirements.txt")
    assert not is_prose_candidate("tests/roots/test-basic/index.rst")  # a test fixture, not docs
    assert not is_prose_candidate(".github/ISSUE_TEMPLATE/bug.md")
    assert licence_text("LICENSE.rst") == "licence_text"
    assert prose_file_rule("docs/empty.rst", 10, b"Title\n=====\n")[0] == "no_prose"


# --- a whole build --------------------------------------------------------------------------


@pytest.fixture()
def fake_world(tmp_path: Path) -> dict[str, Path]:
    """A fake stdlib (two held-out modules), a permissive sdist full of cases, a GPL sdist."""
    stdlib = tmp_path / "stdlib"
    stdlib.mkdir()
    (stdlib / "fractions.py").write_text(module("fraction", 50))
    (stdlib / "textwrap.py").write_text(module("wrapper", 50))
    (stdlib / "other.py").write_text(module("stdother", 20))
    core = module("core", 40)
    models = module("model", 60)
    files = {
        "fakepkg/__init__.py": "",
        "fakepkg/core.py": core,
        "fakepkg/core_copy.py": core.replace("\n", "  \n"),
        "fakepkg/_vendor/six.py": module("six"),
        "fakepkg/minified.py": "x = [" + "1, " * 600 + "]\n",
        "fakepkg/gen_pb2.py": "# Generated by the protocol buffer compiler.  DO NOT EDIT!\n"
        + module("proto"),
        "fakepkg/models/bert.py": models,
        "fakepkg/models/roberta.py": renamed(models, "model_step_3(", "roberta_step_3(", 2),
        "fakepkg/similar.py": module("model", 30) + "\n\n" + module("similar", 30, start=30),
        "fakepkg/py2.py": "print 'hello'\n",
        "fakepkg/backport/fractions.py": module("fraction", 50),
        "tests/test_core.py": module("testcore", 10),
        "docs/intro.rst": RST,
        "docs/changes/1.0.rst": release_notes("1.0"),
        "docs/changes/2.0.rst": release_notes("2.0"),
        "README.md": MD,
        "LICENSE.md": "MIT License\n\nPermission is hereby granted, free of charge, to any person...\n",
    }
    cache = tmp_path / "cache"
    (cache / "dists").mkdir(parents=True)
    sdist(cache / "dists" / "fakepkg-1.0.tar.gz", "fakepkg-1.0",
          "Metadata-Version: 2.4\nName: fakepkg\nVersion: 1.0\nLicense-Expression: MIT\n", files)
    sdist(cache / "dists" / "gplpkg-2.0.tar.gz", "gplpkg-2.0",
          "Metadata-Version: 2.4\nName: gplpkg\nVersion: 2.0\nLicense-Expression: GPL-3.0-or-later\n",
          {"gplpkg/a.py": module("gpl"), "gplpkg/b.py": module("gplb"), "docs/index.rst": RST})
    lock = tmp_path / "distributions.lock"
    lock.write_text("fakepkg==1.0\ngplpkg==2.0\n")
    return {"stdlib": stdlib, "cache": cache, "lock": lock, "manifest": tmp_path / "corpus_manifest.json"}


@pytest.fixture()
def built(fake_world: dict[str, Path]) -> dict:
    return run_build(fake_world)


def run_build(world: dict[str, Path], **overrides: object) -> dict:
    """A build of the fake world: no download, one worker, quiet."""
    options: dict = {
        "skip_download": True, "lock_path": world["lock"], "stdlib_root": world["stdlib"],
        "manifest_path": world["manifest"], "workers": 1, "log": lambda line: None,
    }
    return build(world["cache"], **{**options, **overrides})


def test_build_applies_every_rule(built: dict, fake_world: dict[str, Path]) -> None:
    cache = fake_world["cache"]
    python = {d.path for d in iter_documents(cache, "python", ["fakepkg"])}
    assert python == {"fakepkg/core.py", "fakepkg/models/bert.py", "fakepkg/similar.py", "tests/test_core.py"}
    fake = {s["name"]: s for s in built["sources"]}["fakepkg"]
    assert fake["dropped_python"] == {
        "empty": 1, "exact_duplicate": 1, "generated": 1, "held_out_copy": 1, "long_lines": 1,
        "near_duplicate": 1, "syntax_error": 1, "vendored": 1,
    }
    prose = {d.path: d.text for d in iter_documents(cache, "prose", ["fakepkg"])}
    assert set(prose) == {
        "docs/intro.rst", "README.md", "docs/changes/1.0.rst", "docs/changes/2.0.rst"
    }
    assert "secret_code_line" not in prose["docs/intro.rst"]
    assert fake["dropped_prose"] == {"licence_text": 1}


def test_non_permissive_distribution_is_not_written(built: dict, fake_world: dict[str, Path]) -> None:
    gpl = {s["name"]: s for s in built["sources"]}["gplpkg"]
    assert gpl["permissive"] is False and gpl["licence"] == "GPL-3.0-or-later"
    assert gpl["kept"] == 0 and gpl["dropped"] == {"licence": 3}
    assert not list(iter_documents(fake_world["cache"], "python", ["gplpkg"]))


def test_held_out_stdlib_modules_are_never_written(built: dict, fake_world: dict[str, Path]) -> None:
    held = {f.text for f in corpus.split(fake_world["stdlib"])[1]}
    assert len(held) == 2
    documents = list(iter_documents(fake_world["cache"], "python"))
    assert {d.path for d in documents if d.source == "cpython-stdlib"} == {"other.py"}
    assert not any(d.text in held or "fraction_step" in d.text for d in documents)
    assert built["held_out"] == list(corpus.HELD_OUT)


def test_manifest_counts_are_consistent(built: dict, fake_world: dict[str, Path]) -> None:
    on_disk = json.loads(fake_world["manifest"].read_text())
    assert on_disk == {k: v for k, v in built.items() if k != "build_seconds"}
    assert json.loads((fake_world["cache"] / "manifest.json").read_text()) == built
    assert [s["name"] for s in built["sources"]] == ["cpython-stdlib", "fakepkg", "gplpkg"]
    archive_py = {"fakepkg": 12, "gplpkg": 2, "cpython-stdlib": 1}
    for source in built["sources"]:
        for kind in ("python", "prose"):
            documents = list(iter_documents(fake_world["cache"], kind, [source["name"]]))
            assert source[f"kept_{kind}"] == len(documents)
        assert source["kept"] == source["kept_python"] + source["kept_prose"]
        assert source["kept_python"] + sum(source["dropped_python"].values()) == archive_py[source["name"]]
        assert source["tokens"] == source["python_tokens"] + source["prose_tokens"]
        assert source["dropped"] == {
            k: source["dropped_python"].get(k, 0) + source["dropped_prose"].get(k, 0)
            for k in source["dropped_python"].keys() | source["dropped_prose"].keys()
        }
    assert built["python_tokens"] == sum(s["python_tokens"] for s in built["sources"]) > 0
    assert built["prose_tokens"] == sum(s["prose_tokens"] for s in built["sources"]) > 0
    assert built["targets_met"] is False  # a tiny corpus misses the real targets
    assert built["tokenizer"]["path"] == "engine/embedded/tokenizer.json"


def test_rebuild_is_deterministic_and_only_builds_named_sources(
    built: dict, fake_world: dict[str, Path]
) -> None:
    cache = fake_world["cache"]
    first = (cache / "documents" / "python" / "fakepkg.jsonl").read_bytes()
    again = run_build(fake_world, only={"fakepkg"}, workers=2)  # forked workers, same result
    assert [s["name"] for s in again["sources"]] == ["fakepkg"]
    assert (cache / "documents" / "python" / "fakepkg.jsonl").read_bytes() == first
    # the repository manifest describes full builds only
    committed = json.loads(fake_world["manifest"].read_text())
    assert [s["name"] for s in committed["sources"]][0] == "cpython-stdlib"


def test_change_logs_are_kept_within_a_budget(
    fake_world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    one_file = len(clean(release_notes("1.0"), "docs/changes/1.0.rst"))
    monkeypatch.setattr(corpus_build, "CHANGELOG_BUDGET_CHARS", one_file)
    manifest = run_build(fake_world, manifest_path=None)
    fake = {s["name"]: s for s in manifest["sources"]}["fakepkg"]
    assert fake["dropped_prose"]["changelog_budget"] == 1
    kept = {d.path for d in iter_documents(fake_world["cache"], "prose", ["fakepkg"])}
    assert "docs/changes/1.0.rst" in kept and "docs/changes/2.0.rst" not in kept


def test_missing_archive_is_recorded(fake_world: dict[str, Path]) -> None:
    (fake_world["cache"] / "dists" / "gplpkg-2.0.tar.gz").unlink()
    manifest = run_build(fake_world, manifest_path=None)
    gpl = {s["name"]: s for s in manifest["sources"]}["gplpkg"]
    assert "error" in gpl and gpl["dropped"] == {"download_failed": 1}


# --- the reader API and the CLI -----------------------------------------------------------------


def test_reader_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DG_LSP_CORPUS", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("DG_LSP_CORPUS")
    assert default_cache_dir() == Path.home() / ".cache" / "dg-lsp" / "corpus"
    write_documents(tmp_path / "c" / "documents" / "prose" / "x.jsonl", [("b.md", "B"), ("a.md", "A")])
    docs = list(iter_documents(tmp_path / "c", "prose"))
    assert docs == [Document("x", "a.md", "A"), Document("x", "b.md", "B")]
    with pytest.raises(dataclasses.FrozenInstanceError):
        docs[0].text = "changed"  # type: ignore[misc]
    with pytest.raises(FileNotFoundError):
        list(iter_documents(tmp_path / "c", "python"))
    assert not [p for p in (tmp_path / "c" / "documents" / "prose").iterdir() if p.name.startswith(".")]


def test_cli_refuses_a_cache_inside_the_repository() -> None:
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a checkout")
    with pytest.raises(SystemExit) as exit_info:
        main(["--cache", str(REPO_ROOT / "corpus-cache"), "--skip-download"])
    assert exit_info.value.code == 2
    assert corpus.main([]) == 2 and os.path.exists(corpus.__file__)


def test_building_without_the_training_extra_says_what_to_install(monkeypatch, capsys):
    # The server's install leaves datasketch out; the build must say so rather than fail on import.
    import sys

    monkeypatch.setitem(sys.modules, "datasketch", None)
    for name in ("dg_engine.train.corpus_build", "dg_engine.train.dedup"):
        monkeypatch.delitem(sys.modules, name)
    assert corpus.main(["build", "--skip-download"]) == 2
    assert "pip install 'dg-lsp[train]'" in capsys.readouterr().err
