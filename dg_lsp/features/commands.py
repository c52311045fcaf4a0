"""workspace/executeCommand: dg.infill, dg.rewriteParagraph and dg.status.

The editor integrations call these from their own commands. Infill and rewrite run the model on
the worker and apply the result themselves with workspace/applyEdit, returning whether it was
applied; dg.status answers from the loop even while the worker is busy.

Generic clients (Helix, eglot, Zed, Sublime LSP) bind a command to the standard parameter shapes,
so every document command takes `TextDocumentPositionParams` (`{textDocument: {uri}, position}`)
and `{textDocument: {uri}, range}` as well as the flat `{uri, position | range}`; `normalize`
turns each into the flat form, and an infill at a position is an infill of the empty range there.
"""

from __future__ import annotations

from lsprotocol import types

from .base import Ready, WorkerFeature
from ..syntax import language_for, paragraph_at
from . import code_actions, common

COMMANDS = ("dg.infill", "dg.rewriteParagraph", "dg.status", "dg.documentHash", "dg.learnRepository", "dg.stopLearning")
MODES = ("fim", "holes", "body", "rewrite")


def _fail(message: str) -> Ready:
    return Ready({"applied": False, "message": message})


USAGE = {
    "dg.infill": "{textDocument: {uri}, position} or {textDocument: {uri}, range}, optionally with "
                 "mode (fim, holes, body, rewrite) and instruction; or the flat {uri, range, mode}",
    "dg.rewriteParagraph": "{textDocument: {uri}, position} or {uri, position}, optionally with instruction",
    "dg.documentHash": "{textDocument: {uri}} or {uri}",
    "dg.learnRepository": "nothing (the first workspace folder), or {folder: uri} or {textDocument: {uri}}, "
                          "optionally with minutes",
}


def normalize(arg) -> dict | None:
    """The flat `{uri, position?, range?, ...}` form of a command argument, or None if it has no uri.

    `{textDocument: {uri}}` becomes `uri`; an infill given only a position gets the empty range there."""
    if not isinstance(arg, dict):
        return None
    flat = dict(arg)
    document = flat.pop("textDocument", None)
    if isinstance(document, dict) and isinstance(document.get("uri"), str) and "uri" not in flat:
        flat["uri"] = document["uri"]
    if not isinstance(flat.get("uri"), str):
        return None
    position = flat.get("position")
    if "range" not in flat and isinstance(position, dict):
        flat["range"] = {"start": position, "end": position}
    return flat


def prepare(server, command: str, args: list):
    if command == "dg.status":
        return Ready(server.status())
    if command == "dg.learnRepository":
        return Ready(_learn(server, args[0] if args and isinstance(args[0], dict) else {}))
    if command == "dg.stopLearning":
        return Ready(server.learner.stop())
    arg = normalize(args[0] if args else None)
    if command == "dg.documentHash":
        # Clients and benchmarks compare this with their own text to detect desyncs.
        snapshot = server.documents.snapshot(arg["uri"]) if arg else None
        return Ready(None if snapshot is None else {"version": snapshot.version, "sha256": snapshot.digest()})
    if arg is None:
        return _fail(f"{command} needs one argument: {USAGE.get(command, 'an object with a uri')}")
    if command == "dg.rewriteParagraph":
        return _prepare_paragraph(server, arg)
    mode = arg.get("mode", "fim")
    if mode not in MODES or not isinstance(arg.get("range"), dict):
        return _fail(f"dg.infill needs {USAGE['dg.infill']}")
    instruction = arg.get("instruction") if isinstance(arg.get("instruction"), str) else None
    snapshot = common.usable_snapshot(server, arg["uri"])
    if snapshot is None:
        return _fail("the document is not open, too large or not text")
    data = {"uri": arg["uri"], "version": snapshot.version, "mode": mode, "range": arg["range"]}
    if mode == "body":
        codec = snapshot.codec(server.documents.encoding)
        try:
            start, _ = codec.offsets(server.converter.structure(arg["range"], types.Range))
        except Exception:
            return _fail("dg.infill's range is not a valid LSP range")
        modes = {m: (a, b) for m, a, b in code_actions.available_modes(server, snapshot, start, start)}
        if "body" not in modes:
            return _fail("no empty or placeholder body at the cursor")
        data["range"] = code_actions._range_dict(codec, *modes["body"])
    jobs, why = code_actions.plan(server, data, instruction)
    return _fail(why) if jobs is None else ("edit", jobs)


def _learn(server, arg: dict) -> dict:
    """Start learning the folder named by the argument, the one holding its document, or the first."""
    from ..crossfile import uri_path

    folder = uri_path(arg["folder"]) if isinstance(arg.get("folder"), str) else None
    document = normalize(arg) if arg else None
    if folder is None and document is not None:
        path = uri_path(document["uri"])
        folder = next((f for f in server.folders if path is not None and path.is_relative_to(f)), None)
    folder = folder or (server.folders[0] if server.folders else None)
    if folder is None:
        return {"started": False, "message": "open a workspace folder (a git repository) to learn it"}
    minutes = arg.get("minutes", 20)
    if not isinstance(minutes, (int, float)) or isinstance(minutes, bool) or not 0 < minutes <= 24 * 60:
        return {"started": False, "message": "minutes must be a number between 0 and 1440"}
    return server.learner.start(folder, float(minutes))


def _prepare_paragraph(server, arg: dict):
    snapshot = common.usable_snapshot(server, arg["uri"])
    if snapshot is None:
        return _fail("the document is not open, too large or not text")
    # A range (the standard shape some clients send for a selection) stands for its start.
    at = arg.get("position") or (arg.get("range") or {}).get("start")
    try:
        position = server.converter.structure(at, types.Position)
    except Exception:
        return _fail(f"dg.rewriteParagraph needs {USAGE['dg.rewriteParagraph']}")
    offset = snapshot.codec(server.documents.encoding).offset(position)
    paragraph = paragraph_at(snapshot.text, offset, language_for(snapshot.language_id, snapshot.uri))
    if paragraph is None:
        return _fail("no paragraph, comment block or docstring at the cursor")
    job = common.job_at(server, snapshot, paragraph.start, paragraph.end, "paragraph", instruction=arg.get("instruction"))
    return _fail("the model is not loaded") if job is None else ("edit", [job])


def compute(server, job, token):
    _, jobs = job
    return code_actions.compute_edits(server, jobs, token)


async def finish(server, job, result):
    _, jobs = job
    edits, fills = result or ([], [])  # None: the engine failed (already reported)
    for fill_job, fill in fills:
        server.record_fill("command", fill_job, fill)
    latency = round(sum(f.latency_ms for _, f in fills), 1)
    if not edits:
        return {"applied": False, "message": "the model had nothing to change", "latencyMs": latency}
    edit = code_actions.workspace_edit(server, jobs[0].snapshot, edits)
    response = await server.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label="dg-lsp"))
    applied = bool(response and response.applied)
    message = "" if applied else (getattr(response, "failure_reason", None) or "the editor did not apply the edit")
    return {"applied": applied, "message": message, "latencyMs": latency, "edits": len(edits)}


FEATURE = WorkerFeature(prepare, compute, finish)
