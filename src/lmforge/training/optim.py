"""AdamW (Loshchilov & Hutter 2019) with weight decay on matrices only.

Following nanoGPT and litgpt: every parameter with two or more dimensions (linear weights,
embedding tables) is decayed; one-dimensional ones (biases, norm gains, NSP pooler bias) are not,
since shrinking a gain or a bias towards zero regularises nothing useful. Tied parameters are
counted once; frozen parameters (`requires_grad=False`) are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import nn

from lmforge.errors import ConfigError
from lmforge.training.config import OptimConfig
from lmforge.training.schedules import build_scheduler


def parameter_groups(model_or_params: nn.Module | Iterable[nn.Parameter], weight_decay: float) -> list[dict]:
    """Two AdamW groups: `{"params": >=2-D, "weight_decay": wd}` and `{"params": 1-D, "weight_decay": 0}`."""
    params = model_or_params.parameters() if isinstance(model_or_params, nn.Module) else model_or_params
    seen: set[int] = set()
    decay, no_decay = [], []
    for p in params:
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (decay if p.dim() >= 2 else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def build_optimizer(
    model_or_params: nn.Module | Iterable[nn.Parameter],
    lr: float,
    weight_decay: float = 0.1,
    betas: Sequence[float] = (0.9, 0.95),
    eps: float = 1e-8,
) -> torch.optim.AdamW:
    """AdamW over `parameter_groups`; `betas` may be a list (as Hydra passes it). The values' ranges
    are checked once, where the config is parsed (`OptimConfig`, `FinetuneConfig`)."""
    groups = parameter_groups(model_or_params, weight_decay)
    if not groups[0]["params"] and not groups[1]["params"]:
        raise ConfigError(
            "parameters: got none that require grad, expected a model with trainable parameters"
        )
    return torch.optim.AdamW(groups, lr=lr, betas=(float(betas[0]), float(betas[1])), eps=eps)


def optimization(
    params: Iterable[nn.Parameter], o: OptimConfig, d_model: int, max_steps: int
) -> dict[str, Any]:
    """What a LightningModule's `configure_optimizers` returns: AdamW over `params` and the configured
    warmup schedule, stepped per optimizer update (noam scales by d_model; linear and cosine end at
    max_steps)."""
    optimizer = build_optimizer(params, o.lr, o.weight_decay, o.betas, o.eps)
    extra: dict[str, Any] = {}
    if o.schedule == "noam":
        extra["d_model"] = d_model
    elif o.schedule in ("linear", "cosine") and o.min_lr_ratio is not None:  # the decaying ones' floor
        extra["min_lr_ratio"] = o.min_lr_ratio
    total = max_steps if o.schedule in ("linear", "cosine") else None
    scheduler = build_scheduler(optimizer, o.schedule, o.warmup_steps, total, **extra)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
