"""The systems the quality benchmark compares, and running them over cases in worker processes.

Each system turns a hole into a fill twice over: the raw text (what the model wrote, or the
baseline's text) and the text the server would show after its post-processing. Fills are made
here and scored in `quality.py`, so that the fills can be made in parallel processes (the model
is small and single-threaded inference leaves cores idle) while scoring stays in one place.

Systems: `embedded_n{n}` (the diffusion engine with n candidates, ranked as the server ranks
them), `ar_greedy` (the AR baseline through `dg_engine.autoregressive.ar_generate` with the same
FIM prompt, healed as the engine's head is), `empty`, `previous_line` and `canonical` (the expected middle, a reference row).
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import repeat
from multiprocessing import get_context

from .humaneval import Case

# (raw, shown by the server, milliseconds, every distinct text the server offers, best first)
Fill = tuple[str, str, float, list[str]]
_ENGINES: dict[str, object] = {}


@dataclass(frozen=True)
class Setup:
    """What every worker needs to make the same fills the main process would make."""

    model: str | None
    ar_model: str | None
    ns: tuple[int, ...] = (1, 4)
    seed: int = 0
    context_budget: int = 2048
    threads: int = 0


def max_canvases(set_name: str) -> int:
    """Single-line holes get one canvas (inline ghost text), others four (the code actions' setting)."""
    return 1 if "single_line" in set_name else 4


def engine_for(path: str):
    """A loaded engine, once per process."""
    if path not in _ENGINES:
        from dg_engine import EngineConfig, load_engine

        _ENGINES[path] = load_engine(EngineConfig(model=path, device="cpu"))
    return _ENGINES[path]


def contexts(cases: list[Case], budget: int) -> list[tuple]:
    """The server's context for each hole: `dg_lsp.fill.context_for` on a document snapshot."""
    from dg_lsp.documents import Snapshot
    from dg_lsp.fill import FillJob, context_for
    from dg_lsp.settings import Settings

    settings = Settings(context_budget=budget)
    out = []
    for case in cases:
        snapshot = Snapshot(f"file:///bench/{case.id.replace('/', '_')}.py", 0, "python", case.text)
        out.append(context_for(FillJob(snapshot, case.offset, case.offset, "fim", settings)))
    return out


def offered(texts: list[str], ctx, spec) -> list[str]:
    """What the server offers, best first: rank order (no new syntax errors, then the engine's order),
    repeats dropped, the non-blank texts before a blank one (which is offered only if nothing else is)."""
    from dg_lsp.syntax import rank

    order = [texts[i] for i in rank(texts, ctx, spec)]
    kept = list(dict.fromkeys(t for t in order if t.strip()))
    return kept or order[:1]


def run_diffusion(engine, ctxs, n: int, canvases: int, seed: int) -> list[Fill]:
    from dg_engine import FillRequest
    from dg_lsp.syntax import postprocess

    out = []
    for ctx, spec in ctxs:
        started = time.perf_counter()
        result = engine.fill(FillRequest(prefix=ctx.prefix, suffix=ctx.suffix, n=n, max_canvases=canvases, seed=seed))
        cleaned = [postprocess(c.text, ctx, spec) for c in result.candidates]
        texts = offered(cleaned, ctx, spec)
        out.append((result.candidates[0].text, texts[0], (time.perf_counter() - started) * 1000, texts))
    return out


def run_ar(engine, ctxs, max_new_tokens: int) -> list[Fill]:
    from dg_engine.autoregressive import ar_generate
    from dg_lsp.syntax import postprocess

    out = []
    for ctx, spec in ctxs:
        started = time.perf_counter()
        ids = engine.format.infill_ids(ctx.prefix, ctx.suffix)
        # Healed as the engine's head is (`dg_engine.healing`), so the comparison stays like for like.
        heal = engine.healer.point(ids, engine.format.specials.fim_middle)
        if heal is not None:
            ids = ids[:-2] + ids[-1:]
        new, _, _ = ar_generate(engine.model, ids, max_new_tokens, set(engine.format.stop_ids),
                                None if heal is None else heal.allowed)
        raw = engine.tokenizer.decode(new, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        raw = raw if heal is None else raw[len(heal.text):]
        shown = postprocess(raw, ctx, spec)
        out.append((raw, shown, (time.perf_counter() - started) * 1000, [shown]))
    return out


def previous_line(case: Case) -> str:
    """The nearest non-blank line above the hole's line, from the hole's column on."""
    line_start = case.text.rfind("\n", 0, case.offset) + 1
    column = case.offset - line_start
    for line in reversed(case.text[: max(0, line_start - 1)].split("\n")):
        if line.strip():
            return line[column:]
    return ""


def run_fixed(fills: list[str], ctxs) -> list[Fill]:
    from dg_lsp.syntax import postprocess

    out = []
    for fill, (ctx, spec) in zip(fills, ctxs):
        started = time.perf_counter()
        shown = postprocess(fill, ctx, spec)
        out.append((fill, shown, (time.perf_counter() - started) * 1000, [shown]))
    return out


def fill_chunk(setup: Setup, set_name: str, cases: list[Case]) -> dict[str, list[Fill]]:
    """Every system's fills for some cases of one set, system after system."""
    canvases = max_canvases(set_name)
    ctxs = contexts(cases, setup.context_budget)
    out: dict[str, list[Fill]] = {}
    if setup.model:
        engine = engine_for(setup.model)
        for n in setup.ns:
            out[f"embedded_n{n}"] = run_diffusion(engine, ctxs, n, canvases, setup.seed)
    if setup.ar_model:
        ar = engine_for(setup.ar_model)
        out["ar_greedy"] = run_ar(ar, ctxs, ar.defaults.canvas_length * canvases)
    out["empty"] = run_fixed(["" for _ in cases], ctxs)
    out["previous_line"] = run_fixed([previous_line(c) for c in cases], ctxs)
    out["canonical"] = run_fixed([c.middle for c in cases], ctxs)
    return out


def _start_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads or 1)


def fill_all(setup: Setup, sets: dict[str, list[Case]], jobs: int = 1, chunk: int = 10) -> dict[str, dict[str, list[Fill]]]:
    """Fills of every system for every case, per set, in case order; `jobs` worker processes."""
    tasks = [(name, cases[i : i + chunk]) for name, cases in sets.items() for i in range(0, len(cases), chunk)]
    if jobs <= 1:
        results = [fill_chunk(setup, name, part) for name, part in tasks]
    else:
        # spawn, not fork: forking a process that has run torch can hang in its thread pools.
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=_start_worker,
                                 initargs=(setup.threads,)) as pool:
            results = list(pool.map(fill_chunk, repeat(setup), *zip(*tasks)))
    merged: dict[str, dict[str, list[Fill]]] = {name: {} for name in sets}
    for (name, _), result in zip(tasks, results):
        for system, fills in result.items():
            merged[name].setdefault(system, []).extend(fills)
    return merged
