"""dg-lsp: a language server that fills and rewrites code with a local diffusion model."""

__version__ = "0.1.0"
