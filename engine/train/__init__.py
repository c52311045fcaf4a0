"""Training pipeline of dg-lsp's embedded DiffusionGemma model (corpus, tokenizer, examples, loop)."""
