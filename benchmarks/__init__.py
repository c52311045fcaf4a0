"""dg-lsp's benchmarks: speed, memory and quality, measured as ratios in one run on one machine."""
