"""The routing table: every LSP method, the module that handles it, and where it runs.

Three execution policies:

* `LOOP`: runs on the event loop, in message order. For notifications that change state
  (edits must land before later requests read them) and for cheap requests.
* `WORKER`: the handler snapshots what it needs on the loop (`prepare`), the model work runs on
  the single compute worker (`compute`), and the reply is built back on the loop (`finish`).
  A `$/cancelRequest` cancels the worker job through its token.
* `LATEST`: like WORKER, and a newer request with the same key (the document) cancels the older
  one, which replies `RequestCancelled`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable

from lsprotocol import types

from .features.base import Ready, WorkerFeature  # noqa: F401  (re-exported)
from .features import (code_actions, commands, completion, configuration, inlay_hints, inline, lifecycle, next_edit,
                       text_sync)


class Policy(enum.Enum):
    LOOP = "loop"
    WORKER = "worker"
    LATEST = "latest"


@dataclass(frozen=True)
class Route:
    method: str
    handler: Callable | WorkerFeature
    policy: Policy
    reason: str
    options: Any = None


ROUTES: tuple[Route, ...] = (
    Route(types.INITIALIZE, lifecycle.initialize, Policy.LOOP,
          "reads options and starts the model load on its own thread, so it answers at once"),
    Route(types.INITIALIZED, lifecycle.initialized, Policy.LOOP, "starts watching the user's config file"),
    Route(types.SHUTDOWN, lifecycle.shutdown, Policy.LOOP, "cancels queued and running model work before replying"),
    Route(types.EXIT, lifecycle.exit, Policy.LOOP, "frees the model before the process ends"),
    Route(types.TEXT_DOCUMENT_DID_OPEN, text_sync.did_open, Policy.LOOP,
          "edits must be applied in order, before any later request reads the document"),
    Route(types.TEXT_DOCUMENT_DID_CHANGE, text_sync.did_change, Policy.LOOP,
          "edits must be applied in order, before any later request reads the document"),
    Route(types.TEXT_DOCUMENT_DID_SAVE, text_sync.did_save, Policy.LOOP, "nothing to compute"),
    Route(types.TEXT_DOCUMENT_DID_CLOSE, text_sync.did_close, Policy.LOOP, "drops the document's state at once"),
    Route(types.WORKSPACE_DID_CHANGE_CONFIGURATION, configuration.did_change_configuration, Policy.LOOP,
          "settings apply to every later request; a model change reloads in the background"),
    Route(types.TEXT_DOCUMENT_INLINE_COMPLETION, inline.FEATURE, Policy.LATEST,
          "while the user types only the newest ghost text for a document is worth computing",
          types.InlineCompletionOptions()),
    Route(types.TEXT_DOCUMENT_COMPLETION, completion.FEATURE, Policy.LATEST,
          "the completion fallback is ghost text in a list: only the newest request matters",
          types.CompletionOptions(resolve_provider=False)),
    Route("dg/nextEdit", next_edit.FEATURE, Policy.LATEST,
          "asked after each pause in typing: only the newest suggestion for a document is worth computing"),
    Route(types.TEXT_DOCUMENT_CODE_ACTION, code_actions.list_actions, Policy.LOOP,
          "listing actions is cheap tree-sitter work; the model runs only when one is resolved",
          types.CodeActionOptions(
              code_action_kinds=[types.CodeActionKind.RefactorRewrite, types.CodeActionKind.Refactor, "refactor.dg"],
              resolve_provider=True,
          )),
    Route(types.TEXT_DOCUMENT_INLAY_HINT, inlay_hints.inlay_hints, Policy.LOOP,
          "hints come from spans the server already holds; no model work"),
    Route(types.CODE_ACTION_RESOLVE, code_actions.RESOLVE, Policy.WORKER,
          "the fill runs on the model; each resolve is a deliberate user action, so none supersedes another"),
    Route(types.WORKSPACE_EXECUTE_COMMAND, commands.FEATURE, Policy.WORKER,
          "infill and rewrite commands run the model; dg.status answers from the loop without waiting",
          types.ExecuteCommandOptions(commands=list(commands.COMMANDS))),
)
