"""A metadata-only PEP 517 build backend, so that `pip download` fetches an sdist without building it.

`pip download --no-deps --no-binary :all: NAME==VERSION` still asks the sdist's own build backend
for the distribution's metadata before it saves the archive (pip issue 1884). For numpy, scipy or
pandas that means installing meson, ninja and compilers' worth of build dependencies, and for
backends without a `prepare_metadata_for_build_wheel` hook (meson-python) building the whole
wheel, which fails or takes an hour on two cores. The corpus only needs the archive's bytes.

`fetch.py` copies this file as `sitecustomize.py` into a temporary folder and puts that folder on
`PYTHONPATH` of a `pip download --no-build-isolation` run. Python imports `sitecustomize` at the
start of every interpreter; only in pip's hook subprocess (recognised by the environment variable
that pip's vendored `pyproject_hooks` sets for it) the backend named by the sdist is swapped for
this module, which answers the metadata hook with the sdist's own `PKG-INFO`. pip then checks
name and version as usual and saves the untouched archive. Nothing is ever built or installed.
Imported normally (as `dg_engine.train.pkginfo_backend`) the module changes nothing.
"""

from __future__ import annotations

import os
import re
from email.parser import Parser
from pathlib import Path
from typing import Any

# The variables pip's vendored pyproject_hooks sets for its in-process hook runner.
_BACKEND_VARIABLE = "_PYPROJECT_HOOKS_BUILD_BACKEND"
_BACKEND_PATH_VARIABLE = "_PYPROJECT_HOOKS_BACKEND_PATH_JSON"
_THIS_MODULE = "sitecustomize"


def _swap_backend() -> None:
    """In pip's hook subprocess, make the hook runner import this module as the backend."""
    if os.environ.get(_BACKEND_VARIABLE) and __name__ == _THIS_MODULE:
        os.environ[_BACKEND_VARIABLE] = _THIS_MODULE
        # An in-tree backend path would make the runner insist the backend lives in the tree.
        os.environ.pop(_BACKEND_PATH_VARIABLE, None)


def dist_info_name(pkg_info: str) -> str:
    """`numpy-2.4.6.dist-info` for a PKG-INFO text, with the name normalised as wheels spell it."""
    message = Parser().parsestr(pkg_info, headersonly=True)
    name, version = message.get("Name"), message.get("Version")
    if not name or not version:
        raise ValueError("PKG-INFO has no Name or Version")
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}.dist-info"


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    """Nothing needs installing: the metadata is read, not built."""
    return []


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: dict[str, Any] | None = None
) -> str:
    """Write `<name>-<version>.dist-info/METADATA` from the sdist's `PKG-INFO` (cwd is the sdist)."""
    pkg_info = Path("PKG-INFO").read_text(encoding="utf-8")
    name = dist_info_name(pkg_info)
    target = Path(metadata_directory) / name
    target.mkdir(parents=True, exist_ok=True)
    (target / "METADATA").write_text(pkg_info, encoding="utf-8")
    return name


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """Never called by `pip download`; refusing keeps a misuse from producing a fake wheel."""
    raise RuntimeError("the metadata-only backend builds nothing")


_swap_backend()
