"""The `dg-lsp` command: serve the language server, fill one hole, fill a batch, check the setup, adapt.

Every subcommand shares the engine options (`--model`, `--device`, `--dtype`, `--quantization`,
`--canvas-length`, `--max-steps`), so what works in `dg-lsp infill` works the same in the server.
Errors that a user can fix are printed as one line, without a traceback, with exit status 2.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

from . import __version__


def _engine_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model")
    group.add_argument("--model", default="embedded", help="'embedded', a model directory, or a cached Hugging Face id")
    group.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    group.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    group.add_argument("--quantization", default="auto", choices=["auto", "none", "int8", "fp8", "nf4"],
                       help="auto: on the CPU, the fastest of fp32, bf16 and int8 here (measured once); none elsewhere")
    group.add_argument("--canvas-length", type=int, default=0, help="tokens per canvas (0: the model's default)")
    group.add_argument("--max-steps", type=int, default=0, help="denoising steps per canvas (0: the model's default)")
    group.add_argument("--lead-beam", type=int, default=0,
                       help="first lines a line lead weighs, 1 for the greedy one (0: the model's default)")
    group.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0: one less than the cores, at most 4)")
    group.add_argument("--adapter", default="", help="an adapter directory made by `dg-lsp adapt`")
    group.add_argument("--prompt-format", default="auto", choices=["auto", "fim", "pinned", "chat"],
                       help="fim: FIM sentinels; pinned: the suffix pinned in the canvas; chat: the chat template")


def engine_config(args: argparse.Namespace):
    from dg_engine import EngineConfig

    return EngineConfig(
        model=args.model,
        device=args.device,
        dtype=args.dtype,
        quantization=args.quantization,
        canvas_length=args.canvas_length,
        max_steps=args.max_steps,
        lead_beam=args.lead_beam,
        threads=args.threads,
        adapter=args.adapter,
        prompt_format=args.prompt_format,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dg-lsp", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"dg-lsp {__version__}")
    sub = parser.add_subparsers(dest="command")

    serve = sub.add_parser("serve", help="run the language server (stdio unless --tcp)")
    serve.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    serve.add_argument("--stdio", action="store_true", help="use stdio (the default; accepted for editors that pass it)")
    _engine_options(serve)

    infill = sub.add_parser("infill", help="print the fill for a cursor in a file, or fill a JSONL batch")
    infill.add_argument("file", nargs="?", help="source file")
    infill.add_argument("--at", metavar="LINE:COL", help="cursor position, 1-based line and column")
    infill.add_argument("--n", type=int, default=1, help="candidates to print")
    infill.add_argument("--jsonl", metavar="IN", help="batch input: one {id, prefix, suffix[, language]} per line")
    infill.add_argument("--out", metavar="OUT", help="batch output file (JSONL)")
    infill.add_argument("--max-canvases", type=int, default=4, help="canvases in a row for long middles")
    infill.add_argument("--seed", type=int, default=0)
    _engine_options(infill)

    check = sub.add_parser("check", help="print versions, device, model, memory and one infill's timing")
    _engine_options(check)

    from .adapt import add_parser as add_adapt

    add_adapt(sub)
    sub.add_parser("train", help="train the embedded model (see `dg-lsp train -- --help`)", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["train"]:
        from dg_engine.train.__main__ import main as train_main

        return train_main([a for a in argv[1:] if a != "--"])
    parser = build_parser()
    args = parser.parse_args(argv or ["serve"])
    from dg_engine import EngineError

    try:
        if args.command == "serve":
            from .server import serve

            return serve(engine_config(args), tcp=args.tcp)
        if args.command == "infill":
            from .batch import run_batch, run_file

            if args.jsonl:
                return run_batch(args, engine_config(args))
            if not args.file or not args.at:
                parser.error("infill needs FILE --at LINE:COL, or --jsonl IN --out OUT")
            return run_file(args, engine_config(args))
        if args.command == "check":
            return check(engine_config(args))
        if args.command == "adapt":
            from .adapt import run_adapt

            return run_adapt(args)
    except EngineError as exc:
        print(f"dg-lsp: {exc}", file=sys.stderr)
        return 2
    parser.print_help()
    return 0


def check(config) -> int:
    """Report what runs where, and how long one infill takes."""
    import torch
    import transformers

    from dg_engine import FillRequest, load_engine

    print(f"dg-lsp        {__version__}")
    print(f"python        {platform.python_version()}")
    print(f"torch         {torch.__version__} (CUDA available: {torch.cuda.is_available()})")
    print(f"transformers  {transformers.__version__}")
    started = time.perf_counter()
    engine = load_engine(config)
    info = engine.info()
    print(f"model         {info['model']} ({info['format']} prompts, {info['parameters'] / 1e6:.1f}M parameters)")
    print(f"device        {info['device']}, {info['dtype']}, quantization {info['quantization']}")
    if info.get("precision"):
        print(f"precision     {info['precision']}")
    print(f"memory        {info['memoryBytes'] / 2**20:.1f} MiB of weights")
    if info["quantization"] not in ("none", "int8") and "decompressed" not in info["quantization"]:
        from dg_engine.quantize import quantized_linears

        done, total = quantized_linears(engine.model)
        print(f"quantized     {done} of {total} linear layers hold quantized weights")
    if info.get("adapter"):
        a = info["adapter"]
        print(f"adapter       {a['path']}: " + (f"refused ({a['error']})" if "error" in a else
                                                f"{a['kind']}, {a['files']} files of {a['workspace']}, {a['created']}"))
    print(f"load          {(time.perf_counter() - started) * 1000:.0f} ms")
    prefix = "def mean(values):\n    total = sum(values)\n    return "
    engine.fill(FillRequest(prefix, "\n"))  # The first call pays for lazy initialisation.
    result = engine.fill(FillRequest(prefix, "\n", reuse_cache=False))
    best = result.candidates[0]
    print(f"infill        {result.prefill_ms + result.denoise_ms:.0f} ms ({result.prompt_tokens} prompt tokens, "
          f"{best.steps} steps, {best.tokens_per_forward:.1f} tokens/forward): {best.text!r}")
    return 0


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")
