"""Parameter counts: total, embedding (token / position / segment / value-embedding tables) and non-embedding.

Tied weights are counted once. Non-embedding parameters are what scaling laws call N (Kaplan et al. 2020).
"""

from __future__ import annotations

from torch import nn

from lmforge.model.components.embeddings import Embeddings, ValueEmbeddings


def count_parameters(model: nn.Module) -> dict[str, int]:
    tables = {
        id(table.weight)
        for module in model.modules()
        if isinstance(module, Embeddings)
        for table in (module.tok, module.pos, module.seg)
        if table is not None
    }
    tables |= {id(t.weight) for m in model.modules() if isinstance(m, ValueEmbeddings) for t in m.tables}
    unique = {id(p): p for p in model.parameters()}  # a tied matrix appears once
    total = sum(p.numel() for p in unique.values())
    embedding = sum(p.numel() for key, p in unique.items() if key in tables)
    return {"total": total, "embedding": embedding, "non_embedding": total - embedding}
