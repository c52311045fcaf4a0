"""SUMMARY.md: the headline figure of every benchmark next to its target, from the result files.

Result JSON files hold everything; this page holds what a reader needs first: one table with each
target and whether it was met, then a short section per benchmark, and a note wherever the machine
was loaded while it ran. It reads whatever results exist (the speed and memory benchmarks here,
and `quality.json` / `reliability.json` from the fill-quality benchmarks when they exist).
Quick results are summarised into a temporary directory, never next to the committed results.

    python -m benchmarks.summary [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from .common import RESULTS

NAMES = ("typing", "decode", "kv_reuse", "memory", "gpu", "next_edit", "prose", "adapt", "layouts", "obvious", "healing",
         "quality", "reliability")
# The next-edit targets: right share per kind (renames, the rest), precision of what is shown, p50.
NEXT_EDIT_TARGETS = {"rename": 0.5, "other": 0.3, "precision": 0.8, "p50_ms": 300.0}


def load(results: Path, quick: bool) -> dict[str, dict]:
    out = {}
    for name in NAMES:
        path = results / (f"{name}.quick.json" if quick else f"{name}.json")
        if path.is_file():
            try:
                out[name] = json.loads(path.read_text())
            except json.JSONDecodeError:
                continue
    return out


def yes(met) -> str:
    return "–" if met is None else ("**yes**" if met else "**no**")


def loaded(d: dict) -> str:
    load = d.get("load") or {}
    if not load.get("before"):
        return "load not recorded"
    before, after = (load.get("before") or [0])[0], (load.get("after") or [0])[0]
    cores = d.get("machine", {}).get("cpu_count") or 1
    peak = max(before, after)
    return f"load {before:.1f} → {after:.1f} on {cores} cores" + (" (**other load present**)" if peak > 0.5 * cores else "")


def headline_rows(r: dict[str, dict]) -> list[tuple]:
    rows = []
    if "typing" in r:
        d = r["typing"]
        t = d["targets"]
        for run in d["runs"]:
            lat = run["latency_ms"]
            at_target = run["interval_ms"] == t["interval_ms"]
            rows.append(("typing", f"inline latency @{run['interval_ms']} ms typing (p50 / p95 / p99)",
                         f"{lat['p50']:.0f} / {lat['p95']:.0f} / {lat['p99']:.0f} ms ({run['answered']} answered)",
                         f"p50 ≤ {t['p50_ms']:.0f}, p95 ≤ {t['p95_ms']:.0f} ms" if at_target else "", d["target_met"] if at_target else None))
            rows.append(("typing", f"desyncs @{run['interval_ms']} ms", str(run["desyncs"]), "0", run["desyncs"] == 0))
            rows.append(("typing", f"server CPU per keystroke @{run['interval_ms']} ms; cancelled requests",
                         f"{run['cpu_s_per_edit'] * 1000:.0f} ms; {run['cancelled']} of {run['requests']}", "", None))
        for run in (d.get("long_files") or {}).get("runs") or []:
            lat = run["latency_ms"]
            rows.append(("typing", f"inline latency in 300+ line files, full context @{run['interval_ms']} ms (p50 / p95 / p99)",
                         f"{lat['p50']:.0f} / {lat['p95']:.0f} / {lat['p99']:.0f} ms ({run['answered']} answered)",
                         f"p50 ≤ {t['p50_ms']:.0f}, p95 ≤ {t['p95_ms']:.0f} ms", d["long_files"]["target_met"]))
        for run in d.get("single_thread_runs") or []:
            lat = run["latency_ms"]
            rows.append(("typing", f"same, one-thread server @{run['interval_ms']} ms (p50 / p95 / p99)",
                         f"{lat['p50']:.0f} / {lat['p95']:.0f} / {lat['p99']:.0f} ms ({run['answered']} answered)", "", None))
    if "decode" in r:
        d = r["decode"]
        t, met = d["targets"], d.get("target_met", {})
        for L in d["lengths"]:
            at = L["length"] == t["length"]
            if "ar" in L:
                per_token = f"; per token written {L['speedup_per_token']:.2f}×" if "speedup_per_token" in L else ""
                tokens = f", {L['diffusion'].get('tokens_mean', '?')} vs {L['ar'].get('tokens_mean', '?')} tokens"
                rows.append(("decode", f"speedup vs AR (wall p50 ratio), {L['length']}-token middles",
                             f"{L['speedup']:.2f}× ({L['diffusion']['wall_ms']['p50']:.0f} vs {L['ar']['wall_ms']['p50']:.0f} ms{tokens}{per_token})",
                             f"≥ {t['speedup']:.0f}×" if at else "", met.get("speedup") if at else None))
            rows.append(("decode", f"tokens per forward, {L['length']}-token middles", f"{L['diffusion']['tokens_per_forward_mean']:.2f}",
                         f"≥ {t['tokens_per_forward']:.0f}" if at else "", met.get("tokens_per_forward") if at else None))
            if at and "ar" in L:
                rows.append(("decode", f"exact match, {L['length']}-token middles (diffusion / AR)",
                             f"{L['diffusion']['exact_match']:.2f} / {L['ar']['exact_match']:.2f}", "diffusion ≥ AR",
                             met.get("exact_match_not_worse")))
            if at and "profile" in L:
                p = L["profile"]
                rows.append(("decode", f"profile, {L['length']}-token middles: ms per step (diffusion / AR); prefill share",
                             f"{p['diffusion_ms_per_step']:.1f} / {p['ar_ms_per_step']:.1f} ms ({p['step_cost_ratio']:.1f}×); "
                             f"{p['diffusion_prefill_share']:.0%} of the diffusion wall", "", None))
                rows.append(("decode", "speedup ceiling if every canvas were written in full in max steps",
                             f"{p['full_canvas_speedup_ceiling']:.2f}× (canvas {p['canvas_length']})", "", None))
        scaling = d.get("forward_ms_by_canvas_width", {}).get("self_conditioned")
        if scaling:
            rows.append(("decode", "one decoder forward by canvas width (self-conditioned)",
                         " / ".join(f"{w}: {ms:.1f}" for w, ms in scaling.items()) + " ms", "", None))
        if not d.get("ar_available"):
            rows.append(("decode", "AR baseline", d.get("ar_note", "missing"), "", None))
    if "kv_reuse" in r:
        d = r["kv_reuse"]
        for c in d["contexts"]:
            at = abs(c["context_tokens"] - d["targets"]["context"]) <= 0.1 * d["targets"]["context"]
            rows.append(("kv_reuse", f"incremental prefill speedup @{c['context_tokens']} tokens",
                         f"{c['speedup']:.1f}× ({c['cold_ms']['p50']:.1f} → {c['incremental_ms']['p50']:.1f} ms)",
                         f"≥ {d['targets']['speedup']:.0f}×" if at else "", d["target_met"] if at else None))
        same = all(c["fill_matches_without_reuse"] for c in d["contexts"])
        if "fill_matches_without_reuse_fp32" in d:
            exact = d["fill_matches_without_reuse_fp32"]
            rows.append(("kv_reuse", "fill with reuse = fill without (same seed), fp32", str(exact), "True", exact))
            rows.append(("kv_reuse", f"the same at the default precision ({d.get('precision', '?').split(' ')[0]})",
                         str(same), "", None))
        else:
            rows.append(("kv_reuse", "fill with reuse = fill without (same seed)", str(same), "True", same))
    if "memory" in r:
        d = r["memory"]
        judged = "serving" if any(run.get("install") == "serving" for run in d["runs"]) else "dev"
        for run in d["runs"]:
            install = run.get("install", "dev")
            where = f"{install} install, " if judged == "serving" else ""
            # The target is judged on a user's install: the serving one when it was measured.
            rows.append(("memory", f"peak RSS, {where}{run['quantization']}", f"{run['peak_rss_mb']:.0f} MB (engine {run['engine_memory_mb']:.1f} MB)",
                         f"≤ {d['targets']['peak_rss_mb']:.0f} MB" if install == judged else "",
                         run["peak_rss_mb"] <= d["targets"]["peak_rss_mb"] if install == judged else None))
            if "rssanon_after_requests_mb" in run:
                rows.append(("memory", f"RSS after requests, {run['quantization']}: private / mapped files",
                             f"{run['rssanon_after_requests_mb']:.0f} / {run['rssfile_after_requests_mb']:.0f} MB", "", None))
            if "growth" in run:
                g = run["growth"]
                rows.append(("memory", f"RSS growth over {g['requests']} requests", f"{g['growth_pct']:+.2f}% ({g['rss_start_mb']:.0f} → {g['rss_end_mb']:.0f} MB)",
                             f"< {d['targets']['growth_pct']:.0f}%", d["target_met"]["growth"]))
    if "gpu" in r:
        d = r["gpu"]
        for key in ("bf16",):
            part = d.get(key) or {}
            for count, runs in (part.get("runs") or {}).items():
                for run in runs:
                    rows.append(("gpu", f"{key} step latency, {count} layers, {run['context']} context, canvas {run['canvas']}",
                                 f"{run['step_ms']['p50']:.1f} ms", "", None))
            for e in part.get("extrapolated", []):
                rows.append(("gpu", f"{key} step latency extrapolated to {e['layers']} layers, {e['context']} context", f"{e['step_ms_p50']:.1f} ms", "", None))
        if "tokens_per_s" in d.get("embedded", {}):
            rows.append(("gpu", f"embedded model tokens/s ({d['embedded']['device']})", f"{d['embedded']['tokens_per_s']:.0f}", "", None))
    if "next_edit" in r:
        rows += next_edit_rows(r["next_edit"])
    for row in (r.get("adapt") or {}).get("projects", []):
        for kind, j in row["judged"].items():
            k = row["kinds"][kind]
            rows.append(("adapt", f"{row['project']}, {kind} adapter ({k['minutes']:.0f} min): single-line exact match",
                         f"{j['single_line_before']:.1%} → {j['single_line_after']:.1%}", f"≥ {j['single_line_target']:.1%}",
                         j["single_line_met"]))
            rows.append(("adapt", f"{row['project']}, {kind} adapter: edit similarity of the held-out files' fills",
                         f"{row['before']['edit_similarity']:.3f} → {k['after']['edit_similarity']:.3f}", "", None))
            if "held_loss" in k and "held_loss" in row:
                rows.append(("adapt", f"{row['project']}, {kind} adapter: diffusion loss on the held-out files' holes",
                             f"{row['held_loss']:.3f} → {k['held_loss']:.3f}", "", None))
            rows.append(("adapt", f"{row['project']}, {kind} adapter: held-out stdlib exact match change",
                         f"{j['stdlib_change']:+.1%}", "≥ -2 points", j["stdlib_met"]))
    for layout, sets in ((r.get("layouts") or {}).get("layouts") or {}).items():
        cells = ", ".join(f"{name} {v['exact_match']:.0%} / {v['edit_similarity']:.2f}" for name, v in sets.items())
        rows.append(("layouts", f"{layout} layout: exact match / edit similarity", cells, "", None))
    if "prose" in r:
        d = r["prose"]
        t, met = d["targets"], d["target_met"]
        rows.append(("prose", f"paragraph rewrite: injected word errors fixed ({d['injected_errors']} in {d['paragraphs']} paragraphs)",
                     f"{d['fixed']:.0%}", f"≥ {t['fixed']:.0%}", met["fixed"]))
        rows.append(("prose", "paragraph rewrite: correct words changed", f"{d['broken']:.1%}", f"≤ {t['broken']:.0%}", met["broken"]))
    for model in (r.get("obvious") or {}).get("models") or []:
        wrong = [c["case"] for c in model["cases"] if not c["right"]]
        rows.append(("obvious", f"obvious fills right, {model['model']}", f"{model['right']} of {model['of']}"
                     + (f" (not: {', '.join(wrong)})" if wrong else ""), f"{model['of']} of {model['of']}",
                     model["right"] == model["of"]))
    if "healing" in r:
        d = r["healing"]
        by = {(x["kind"], x["healing"]): x for x in d["rows"]}
        cells = ", ".join(f"{kind} {by[(kind, 'unhealed')]['edit_similarity']:.3f} → {by[(kind, 'healed')]['edit_similarity']:.3f}"
                          for kind in sorted({k for k, _ in by}, key=lambda k: (k != "all", k)))
        rows.append(("healing", f"edit similarity unhealed → healed, {d['cases']} held-out holes "
                     f"({d['healable']} healable)", cells, "", None))
    for name in ("quality", "reliability"):
        if name in r:
            rows += other_rows(name, r[name])
    return rows


def next_edit_rows(d: dict) -> list[tuple]:
    t, rows = NEXT_EDIT_TARGETS, []
    for kind, k in d["kinds"].items():
        bar = t["rename"] if kind == "rename" else t["other"]
        alone = (f"; the proposals alone: {k['rules_right'] / k['cases']:.0%} right"
                 if "rules_right" in k else "")
        rows.append(("next_edit", f"{kind} traces right ({k['cases']} cases; shown {k['shown_share']:.0%}{alone})",
                     f"{k['right_share']:.0%}", f"≥ {bar:.0%}", k["right_share"] >= bar))
    precision = d.get("precision")
    rows.append(("next_edit", "precision of what is shown", "–" if precision is None else f"{precision:.0%}",
                 f"≥ {t['precision']:.0%}", None if precision is None else precision >= t["precision"]))
    lat = d["latency_ms"]
    rows.append(("next_edit", "suggestion latency (p50 / p95)", f"{lat['p50']:.0f} / {lat['p95']:.0f} ms",
                 f"p50 ≤ {t['p50_ms']:.0f} ms", lat["p50"] <= t["p50_ms"]))
    return rows


def reliability_rows(d: dict) -> list[tuple]:
    """The reliability benchmark's headline figures (its file has no targets list)."""
    c, f, e, s = (d.get(k) or {} for k in ("cancellation", "fuzz", "exit", "soak"))
    rows = []
    if "answered_within_100ms_share" in c:
        running = (c.get("running") or {}).get("reply_ms") or {}
        rows.append(("reliability", "cancelled requests answered within 100 ms (running: p50 / p95)",
                     f"{c['answered_within_100ms_share']:.0%} ({running.get('p50', '?')} / {running.get('p95', '?')} ms)", "", None))
    if "inputs" in f:
        rows.append(("reliability", "fuzz inputs; crashes, unreplied, stalls > 5 s",
                     f"{f['inputs']}; {f.get('crashes')}, {f.get('unreplied')}, {f.get('stalls_over_5s')}", "0 crashes", f.get("crashes") == 0))
    if "rss_growth_percent" in s:
        rows.append(("reliability", f"soak RSS growth ({s.get('operations', '?')} operations)", f"{s['rss_growth_percent']:+.2f}%", "", None))
    if "stdin_close_s" in e:
        rows.append(("reliability", "exit after stdin close / editor death / exit (p50)",
                     f"{e['stdin_close_s'].get('p50')} / {(e.get('parent_death_s') or {}).get('p50')} / "
                     f"{(e.get('exit_after_shutdown_s') or {}).get('p50')} s", "", None))
    return rows


def other_rows(name: str, d: dict) -> list[tuple]:
    """Targets of the benchmarks owned elsewhere, in whichever of the usual shapes they come."""
    targets = d.get("targets")
    rows = []
    if name == "reliability":
        try:
            rows = reliability_rows(d)
        except (TypeError, AttributeError, KeyError, ValueError):
            rows = []
    if isinstance(targets, list):
        # Where a target comes as post-processed and raw text, the table shows the processed one
        # (what the editor shows); the raw figures stay in the result file and its own report.
        processed = {(t.get("target"), t.get("system")) for t in targets if isinstance(t, dict) and t.get("variant") == "processed"}
        targets = [t for t in targets if not (isinstance(t, dict) and t.get("variant") == "raw" and (t.get("target"), t.get("system")) in processed)]
        for t in targets:
            if isinstance(t, dict) and "value" in t:
                label = " / ".join(str(t[k]) for k in ("target", "system", "variant") if k in t)
                bar = t.get("bar") or (f"≥ {_fmt(t.get('threshold'))}" if "threshold" in t else "")
                rows.append((name, label, _fmt(t["value"]), bar, t.get("met")))
    elif isinstance(targets, dict):
        met = d.get("target_met")
        for key, value in targets.items():
            rows.append((name, key, "", _fmt(value), met.get(key) if isinstance(met, dict) else None))
    if not rows:
        rows.append((name, "result file present", f"{name}.json", "", None))
    return rows


def _fmt(v) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


UNRECORDED = "CPU model not recorded"


def cpu(machine: dict) -> str:
    return machine.get("cpu_model") or UNRECORDED


def elsewhere(r: dict[str, dict], first: str) -> str:
    """Which benchmarks ran on another CPU than the header's: results come from several hosts,
    and a figure is comparable only with one measured on the same."""
    others: dict[str, list[str]] = {}
    for name, d in r.items():
        if "machine" in d and cpu(d["machine"]) != first:
            others.setdefault(cpu(d["machine"]), []).append(name)
    return "".join(f" {host if host == UNRECORDED else 'On ' + host}: {', '.join(f'`{n}`' for n in names)}."
                   for host, names in others.items())


def render(r: dict[str, dict], quick: bool) -> str:
    lines = ["# Benchmark summary", ""]
    if quick:
        lines += ["Quick run (tiny random model): these figures only show that the benchmarks work.", ""]
    machine = next((d["machine"] for d in r.values() if "machine" in d), {})
    if machine:
        bf16 = {True: ", bf16 in hardware", False: ", no bf16 hardware"}.get(machine.get("bf16_hardware"), "")
        lines += [f"Machine: {machine.get('cpu_count')} CPU cores ({cpu(machine)}{bf16}), "
                  f"torch {machine.get('torch')}, transformers {machine.get('transformers')}, "
                  f"GPU {machine.get('cuda') or 'none'}." + elsewhere(r, cpu(machine)), ""]
    lines += ["| benchmark | figure | value | target | met |", "|---|---|---|---|---|"]
    for bench, figure, value, target, met in headline_rows(r):
        lines.append(f"| {bench} | {figure} | {value} | {target} | {yes(met)} |")
    lines += ["", "## Conditions", ""]
    for name, d in r.items():
        # The quality benchmark compares several models; it lists them under "models".
        model = d.get("model") or ", ".join(sorted(d.get("models", {}))) or "?"
        model = model.get("name", model) if isinstance(model, dict) else model
        on = cpu(d["machine"]) if "machine" in d else "?"
        lines.append(f"- `{name}` ({d.get('machine', {}).get('date', '?')}, {on}): model `{model}`; {loaded(d)}")
    for missing in sorted(set(NAMES) - set(r)):
        lines.append(f"- `{missing}`: no result file")
    lines += ["", "Figures: `typing_latency_cdf.png`, `decode_wall.png`, `kv_reuse.png`, `memory.png` (when the results exist).",
              "Every number comes from the JSON file of the same name, which also records settings and machine.", ""]
    return "\n".join(lines)


README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- summary:start -->", "<!-- summary:end -->"


def into_readme(readme: Path, summary: str) -> bool:
    """Put the summary between the README's markers, so its table is the one the results give.
    Returns whether it changed anything; a README without both markers is left alone."""
    text = readme.read_text() if readme.is_file() else ""
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not (start and end):
        return False
    body = summary.split("\n", 2)[2] if summary.startswith("# ") else summary  # without SUMMARY.md's title
    updated = f"{head}{START}\n{body.strip()}\n{END}{tail}"
    if updated == text:
        return False
    readme.write_text(updated)
    return True


def main(argv: list[str] | None = None) -> Path:
    p = argparse.ArgumentParser(prog="python -m benchmarks.summary", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="summarise the *.quick.json files (into a temp dir by default)")
    p.add_argument("--results", default=str(RESULTS))
    p.add_argument("--out", default=None, help="directory for SUMMARY.md and the plots")
    p.add_argument("--readme", default=None,
                   help="also rewrite the table between this README's summary markers (default: the project's, "
                        "when summarising the published results)")
    args = p.parse_args(argv)
    results = load(Path(args.results), args.quick)
    out = Path(args.out) if args.out else (Path(tempfile.mkdtemp(prefix="dg-bench-summary-")) if args.quick else Path(args.results))
    out.mkdir(parents=True, exist_ok=True)
    path = out / "SUMMARY.md"
    summary = render(results, args.quick)
    path.write_text(summary)
    readme = Path(args.readme) if args.readme else (README if not args.quick and args.out is None else None)
    if readme is not None and into_readme(readme, summary):
        print(f"updated the summary in {readme}")
    from . import plots

    plots.write_all(results, out)
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main()
