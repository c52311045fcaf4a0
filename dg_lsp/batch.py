"""One-shot fills from the command line: a cursor in a file, or a JSONL batch for evaluations.

The batch interface is what evaluation harnesses drive: one output line per input line, in input
order, even when a line is malformed or its fill fails (then `middle` is empty and `error` says
why), so that results can always be joined back to their cases by position or id.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tqdm import tqdm


def cursor_offset(text: str, at: str) -> int:
    """Offset of a 1-based LINE:COL cursor (COL counts characters). A column past the end of its
    line is the line's end, as in an editor; a line that is not in the file is an error, since a
    fill somewhere else would look like an answer."""
    try:
        line_text, col_text = at.split(":")
        line, col = int(line_text), int(col_text)
    except ValueError as exc:
        raise SystemExit(f"dg-lsp: --at must be LINE:COL, got {at!r}") from exc
    lines = text.splitlines(keepends=True) or [""]
    if text.endswith(("\n", "\r")):
        lines.append("")  # the empty line after the last newline, where an editor's cursor can stand
    if not 1 <= line <= len(lines) or col < 1:
        raise SystemExit(f"dg-lsp: --at {at} is outside the file: it has {len(lines)} line(s), and lines and "
                         "columns count from 1")
    start = sum(len(l) for l in lines[: line - 1])
    body = lines[line - 1].rstrip("\r\n")
    return start + min(col - 1, len(body))


def run_file(args, config) -> int:
    from dg_engine import FillRequest, load_engine

    path = Path(args.file)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"dg-lsp: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    offset = cursor_offset(text, args.at)
    engine = load_engine(config)
    request = FillRequest(text[:offset], text[offset:], n=max(1, args.n), seed=args.seed, max_canvases=args.max_canvases)
    result = engine.fill(request)
    for i, cand in enumerate(result.candidates):
        if len(result.candidates) > 1:
            print(f"--- candidate {i + 1} (confidence {cand.mean_confidence:.2f})")
        print(cand.text)
    total = result.prefill_ms + result.denoise_ms
    print(f"[{total:.0f} ms, {result.candidates[0].steps} steps]", file=sys.stderr)
    return 0


def _parse_case(line: str, number: int) -> tuple[str, dict | None, str | None]:
    """(id, case, error): malformed lines still get an id so their output line can be matched."""
    try:
        case = json.loads(line)
    except ValueError as exc:
        return f"line-{number}", None, f"invalid JSON: {exc}"
    if not isinstance(case, dict):
        return f"line-{number}", None, "each line must be a JSON object"
    case_id = case.get("id", f"line-{number}")
    if not isinstance(case.get("prefix"), str) or not isinstance(case.get("suffix", ""), str):
        return case_id, None, "'prefix' (and 'suffix', if given) must be strings"
    return case_id, case, None


def run_batch(args, config) -> int:
    from dg_engine import EngineError, FillRequest, load_engine

    if not args.out:
        print("dg-lsp: --jsonl needs --out OUT", file=sys.stderr)
        return 2
    lines = Path(args.jsonl).read_text(encoding="utf-8").splitlines()
    engine = load_engine(config)
    failures = 0
    with open(args.out, "w", encoding="utf-8") as out:
        for number, line in enumerate(tqdm(lines, desc="infill", unit="case", file=sys.stderr), start=1):
            case_id, case, error = _parse_case(line, number)
            record = {"id": case_id, "middle": "", "tokens_per_forward": 0.0, "steps": 0, "latency_ms": 0.0}
            if case is not None:
                started = time.perf_counter()
                try:
                    result = engine.fill(
                        FillRequest(case["prefix"], case.get("suffix", ""), seed=args.seed, max_canvases=args.max_canvases)
                    )
                    best = result.candidates[0]
                    record.update(middle=best.text, tokens_per_forward=round(best.tokens_per_forward, 3), steps=best.steps)
                except EngineError as exc:
                    error = str(exc)
                record["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
            if error is not None:
                record["error"] = error
                failures += 1
            out.write(json.dumps(record) + "\n")
            out.flush()
    if failures:
        print(f"dg-lsp: {failures} case(s) failed; see their 'error' fields in {args.out}", file=sys.stderr)
    return 0
