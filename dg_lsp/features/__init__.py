"""One module per LSP feature; `dg_lsp.routes` maps methods to them with their execution policy."""
