"""Building blocks shared by every family: norms, positions, masks, attention, MLP, KV cache, block."""
