"""AdamW (Loshchilov & Hutter 2019) with weight decay on matrices only, or Muon for the transformer
stacks' matrices beside it (`MuonAdamW`, `optim.algorithm=muon`).

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
from lmforge.model.stack import TransformerStack
from lmforge.training.config import DECAYING, OptimConfig
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


class MuonAdamW(torch.optim.Optimizer):
    """`torch.optim.Muon` over `matrices` and AdamW (`parameter_groups`) over `rest`, stepped as one
    optimizer, so Lightning's automatic optimisation, gradient clipping and one LR schedule over
    every group work unchanged. The two parts share this optimizer's group dicts (a schedule's rate
    reaches both) and its state (their parameters are disjoint), so a checkpoint holds both."""

    def __init__(self, matrices: list[nn.Parameter], rest: Iterable[nn.Parameter], o: OptimConfig) -> None:
        betas = (float(o.betas[0]), float(o.betas[1]))
        self.muon = torch.optim.Muon(
            [{"params": matrices}],
            lr=o.lr,
            weight_decay=o.weight_decay,
            momentum=o.muon_momentum,
            adjust_lr_fn="match_rms_adamw",
        )
        self.adamw = torch.optim.AdamW(
            parameter_groups(rest, o.weight_decay), lr=o.lr, betas=betas, eps=o.eps
        )
        super().__init__([*self.muon.param_groups, *self.adamw.param_groups], {})
        self._link()

    def _link(self) -> None:
        n = len(self.muon.param_groups)
        self.muon.param_groups, self.adamw.param_groups = self.param_groups[:n], self.param_groups[n:]
        self.muon.state = self.adamw.state = self.state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)  # new group dicts and a new state: the parts follow
        self._link()

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.muon.step()
        self.adamw.step()
        return loss


def hidden_matrices(model: nn.Module) -> list[nn.Parameter]:
    """The weights of the linear layers inside the transformer stacks: what Muon updates (not the token,
    position or relative-bias tables, not the head)."""
    out: dict[int, nn.Parameter] = {}
    for stack in (m for m in model.modules() if isinstance(m, TransformerStack)):
        out.update({id(m.weight): m.weight for m in stack.modules() if isinstance(m, nn.Linear)})
    return list(out.values())


def optimization(
    params: Iterable[nn.Parameter],
    o: OptimConfig,
    d_model: int,
    max_steps: int,
    matrices: Iterable[nn.Parameter] = (),
) -> dict[str, Any]:
    """What a LightningModule's `configure_optimizers` returns: the optimizer over `params` (AdamW, or
    with `optim.algorithm=muon` Muon over those of `params` among `matrices` and AdamW over the rest)
    and the configured warmup schedule, stepped per optimizer update (noam scales by d_model; linear,
    cosine and wsd end at max_steps)."""
    if o.algorithm == "muon":
        params = list(params)
        chosen = {id(p) for p in matrices}
        muon = [p for p in params if id(p) in chosen and p.requires_grad]
        if not muon:
            raise ConfigError("optim.algorithm: got muon for a model with no matrices in a transformer stack")
        optimizer: torch.optim.Optimizer = MuonAdamW(muon, [p for p in params if id(p) not in chosen], o)
    else:
        optimizer = build_optimizer(params, o.lr, o.weight_decay, o.betas, o.eps)
    extra: dict[str, Any] = {}
    if o.schedule == "noam":
        extra["d_model"] = d_model
    elif o.schedule in DECAYING and o.min_lr_ratio is not None:  # the decaying ones' floor
        extra["min_lr_ratio"] = o.min_lr_ratio
    if o.schedule == "wsd":
        extra["decay_fraction"] = o.decay_fraction
    total = max_steps if o.schedule in DECAYING else None
    scheduler = build_scheduler(optimizer, o.schedule, o.warmup_steps, total, **extra)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
