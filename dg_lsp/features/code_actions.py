"""textDocument/codeAction and codeAction/resolve: fill here, fill the holes, complete a body, rewrite.

Listing runs on the event loop and only asks tree-sitter which actions apply at the range. Each
action carries its own `data` (uri, version, range, mode, options); resolve rebuilds the job from
that data alone, runs the model on the worker, and returns the edit. A resolve for a document
that changed since the action was offered returns no edit and says so. Clients that cannot
resolve an action's edit (Emacs eglot 1.9, for one) get the same action as a `dg.infill` command
instead, which runs the model and applies the edit with workspace/applyEdit.
"""

from __future__ import annotations

import logging

from lsprotocol import types

from ..edits import minimal_edits
from ..fill import FillJob
from .base import Ready, WorkerFeature
from ..syntax import enclosing_body, find_holes, language_for
from . import common

log = logging.getLogger(__name__)

FILL_KIND = "refactor.dg.fill"
TITLES = {
    "fim": ("Fill in the middle here", FILL_KIND),
    "holes": ("Fill the holes", FILL_KIND),
    "body": ("Complete this body", FILL_KIND),
    "rewrite": ("Rewrite selection", types.CodeActionKind.RefactorRewrite),
}
MAX_HOLES = 16


def _range_dict(codec, start: int, end: int) -> dict:
    rng = codec.range(start, end)
    return {"start": {"line": rng.start.line, "character": rng.start.character},
            "end": {"line": rng.end.line, "character": rng.end.character}}


def available_modes(server, snapshot, start: int, end: int) -> list[tuple[str, int, int]]:
    """(mode, start, end) for every action that applies to the range."""
    spec = language_for(snapshot.language_id, snapshot.uri)
    modes = []
    if start == end:
        modes.append(("fim", start, end))
    holes = find_holes(snapshot.text, spec, list(server.settings.hole_markers))
    if holes:
        modes.append(("holes", 0, len(snapshot.text)))
    body = enclosing_body(snapshot.text, start, spec)
    if body is not None:
        modes.append(("body", body.start, body.end))
    if start != end:
        modes.append(("rewrite", start, end))
    return modes


def resolves_edits(server) -> bool:
    """Whether the client resolves a code action's `edit` lazily (codeAction.resolveSupport)."""
    caps = server.client_capabilities
    action = caps.text_document.code_action if caps and caps.text_document else None
    support = action.resolve_support if action else None
    return bool(support and "edit" in (support.properties or []))


def list_actions(server, params: types.CodeActionParams) -> list[types.CodeAction]:
    if server.host.engine is None:
        return []
    snapshot = common.usable_snapshot(server, params.text_document.uri)
    if snapshot is None:
        return []
    codec = snapshot.codec(server.documents.encoding)
    start, end = codec.offsets(params.range)
    wanted = params.context.only if params.context else None
    lazy = resolves_edits(server)
    actions = []
    suggested = server.next_edits.action(snapshot)
    if suggested is not None and (not wanted or any(str(suggested.kind).startswith(str(w)) for w in wanted)):
        actions.append(suggested)
    for mode, a, b in available_modes(server, snapshot, start, end):
        title, kind = TITLES[mode]
        if wanted and not any(str(kind).startswith(str(w)) for w in wanted):
            continue
        data = {"uri": snapshot.uri, "version": snapshot.version, "mode": mode, "range": _range_dict(codec, a, b)}
        if lazy:
            actions.append(types.CodeAction(title=f"DG: {title}", kind=kind, data=data))
        else:
            command = types.Command(title=f"DG: {title}", command="dg.infill", arguments=[data])
            actions.append(types.CodeAction(title=f"DG: {title}", kind=kind, command=command))
    return actions


def plan(server, data: dict, instruction: str | None = None):
    """The fill job(s) for an action's data, or a message saying why there are none."""
    if not isinstance(data, dict) or not isinstance(data.get("uri"), str) or data.get("mode") not in TITLES:
        return None, "this action's data is not valid"
    snapshot = common.usable_snapshot(server, data["uri"])
    if snapshot is None:
        return None, "the document is not open, too large or not text"
    if data.get("version") is not None and data["version"] != snapshot.version:
        return None, "the document changed since the action was offered; run it again"
    codec = snapshot.codec(server.documents.encoding)
    try:
        rng = server.converter.structure(data["range"], types.Range)
    except Exception:
        return None, "this action's range is not valid"
    start, end = codec.offsets(rng)
    mode = data["mode"]
    canvases = server.settings.max_canvases
    if mode == "holes":
        spec = language_for(snapshot.language_id, snapshot.uri)
        holes = find_holes(snapshot.text, spec, list(server.settings.hole_markers))[:MAX_HOLES]
        if server.settings.joint_holes and len(holes) > 1:
            spans = tuple((h.start, h.end) for h in holes)
            jobs = [common.job_at(server, snapshot, spans[0][0], spans[-1][1], "holes", holes=spans)]
        else:
            jobs = [common.job_at(server, snapshot, h.start, h.end, "holes", max_canvases=canvases) for h in holes]
    else:
        jobs = [common.job_at(server, snapshot, start, end, mode, max_canvases=canvases, instruction=instruction)]
    if not jobs or any(j is None for j in jobs):
        return None, "the model is not loaded" if server.host.engine is None else "nothing to fill here"
    return jobs, ""


def compute_edits(server, jobs: list[FillJob], token) -> tuple[list[tuple[int, int, str]], list]:
    """Run every job; return (edits in document order, fills)."""
    edits, fills = [], []
    for job in jobs:
        if job.holes:
            joint_edits, fill = common.compute_joint(server, job, token)
            edits += joint_edits
            if fill is not None:
                fills.append((job, fill))
            continue
        fill = common.compute(server, job, token)
        if fill is None or not fill.texts:
            continue
        fills.append((job, fill))
        if job.mode in ("rewrite", "paragraph"):
            old = job.snapshot.text[fill.start : fill.end]
            edits += minimal_edits(old, fill.texts[0], fill.start)
        else:
            edits.append((fill.start, fill.end, fill.texts[0]))
    return sorted(edits), fills


def workspace_edit(server, snapshot, edits) -> types.WorkspaceEdit:
    codec = snapshot.codec(server.documents.encoding)
    text_edits = [types.TextEdit(codec.range(a, b), text) for a, b, text in edits]
    doc = types.OptionalVersionedTextDocumentIdentifier(uri=snapshot.uri, version=snapshot.version)
    return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(doc, text_edits)])


def prepare_resolve(server, action: types.CodeAction):
    jobs, why = plan(server, action.data)
    if jobs is None:
        server.show_warning(f"{action.title}: {why}")
        return Ready(action)
    return (action, jobs)


def compute_resolve(server, job, token):
    action, jobs = job
    return compute_edits(server, jobs, token)


async def finish_resolve(server, job, result):
    action, jobs = job
    edits, fills = result or ([], [])  # None: the engine failed (already reported)
    for fill_job, fill in fills:
        server.record_fill("codeAction", fill_job, fill)
    if not edits:
        rewriting = any(j.mode in ("rewrite", "paragraph") for j in jobs)
        server.show_warning(f"{action.title}: " + ("the model would keep the text as it is" if rewriting
                                                   else "the model had nothing to add"))
        return action
    action.edit = workspace_edit(server, jobs[0].snapshot, edits)
    return action


RESOLVE = WorkerFeature(prepare_resolve, compute_resolve, finish_resolve)
