"""`python -m dg_lsp` is the same as the `dg-lsp` command."""

from .cli import main

raise SystemExit(main())
