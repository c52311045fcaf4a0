"""The tree-sitter layer: pure functions over document text, with no LSP types and no model.

Everything here speaks in Python `str` offsets into the document text; converting to LSP
positions is another module's job.  This package answers four questions for the server: which
grammar a document uses (`language_for`), what text a model should see around a hole
(`extract_context`), how to clean up what the model produced (`postprocess`, `rank`), and where
the holes and prose are (`find_holes`, `enclosing_body`, `paragraph_at`).
"""

from __future__ import annotations

from .context import Budget, HoleContext, approx_tokens, extract_context
from .holes import Hole, enclosing_body, find_holes
from .kinds import HoleKind, classify
from .languages import DEFAULT_MARKER, LanguageSpec, language_for, supported_language_ids
from .paragraphs import Paragraph, paragraph_at
from .postprocess import adds_syntax_errors, postprocess, rank
from .tree import DocumentTree, ErrorSpan, Utf8Index

__all__ = [
    "DEFAULT_MARKER",
    "Budget",
    "DocumentTree",
    "ErrorSpan",
    "Hole",
    "HoleContext",
    "HoleKind",
    "LanguageSpec",
    "Paragraph",
    "Utf8Index",
    "adds_syntax_errors",
    "approx_tokens",
    "classify",
    "enclosing_body",
    "extract_context",
    "find_holes",
    "language_for",
    "paragraph_at",
    "postprocess",
    "rank",
    "supported_language_ids",
]
