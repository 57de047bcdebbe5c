"""What fine-tuning trains: every weight, LoRA adapters, or what is left after freezing.

- LoRA (Hu et al. 2021): W x + (alpha / r) B A x on the Linear layers whose names match
  `target_modules`, B initialised to zero so the adapted model starts as the original. Built with
  `peft` on our plain modules; `merge` folds B A into W and returns the plain model (same parameter
  names as before), which is what a checkpoint or an export holds.
- Freezing: the embeddings, the bottom k layers, or everything but the task head.
`trainable_parameters` counts what the optimizer will update (tied matrices once), for the summary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from torch import nn

from lmforge.errors import ConfigError
from lmforge.structured import enum_value


class Freeze(str, Enum):
    none = "none"  # train everything (or only the adapters, with LoRA)
    embeddings = "embeddings"  # token, position and segment tables
    bottom = "bottom"  # the embeddings and the first `freeze_layers` layers of every stack
    backbone = "backbone"  # everything but the task head (a linear probe)


@dataclass(frozen=True)
class AdaptConfig:
    lora: bool = False  # train low-rank adapters instead of the backbone's weights
    lora_rank: int = 8  # r
    lora_alpha: float = 16.0  # adapter output scaled by alpha / r
    lora_dropout: float = 0.0  # dropout on the adapter's input
    lora_targets: list[str] = field(default_factory=lambda: ["q_proj", "v_proj"])  # Linear names (suffixes)
    freeze: Freeze = Freeze.none
    freeze_layers: int = 0  # with freeze=bottom: how many layers of each stack stay fixed

    def __post_init__(self) -> None:
        object.__setattr__(self, "freeze", enum_value(Freeze, self.freeze, "adapt.freeze"))  # frozen
        if self.lora_rank < 1:
            raise ConfigError(f"adapt.lora_rank: got {self.lora_rank}, expected an integer >= 1")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise ConfigError(
                f"adapt.lora_dropout: got {self.lora_dropout}, expected a probability in [0, 1)"
            )
        if self.freeze_layers < 0 or (self.freeze_layers and self.freeze is not Freeze.bottom):
            raise ConfigError(
                f"adapt.freeze_layers: got {self.freeze_layers}, expected 0, or >= 1 with freeze=bottom"
            )


def add_lora(backbone: nn.Module, cfg: AdaptConfig) -> nn.Module:
    """The backbone with LoRA adapters on the matching Linear layers; only the adapters train."""
    from peft import LoraConfig, inject_adapter_in_model

    linear = [name for name, m in backbone.named_modules() if isinstance(m, nn.Linear)]
    missing = [t for t in cfg.lora_targets if not any(n == t or n.endswith("." + t) for n in linear)]
    if missing or not cfg.lora_targets:
        names = sorted({n.rsplit(".", 1)[-1] for n in linear})
        raise ConfigError(
            f"adapt.lora_targets: {missing or cfg.lora_targets!r} match no Linear layer; expected names "
            f"among: {', '.join(names)}"
        )
    lora = LoraConfig(
        r=cfg.lora_rank,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=list(cfg.lora_targets),
    )
    adapted = inject_adapter_in_model(lora, backbone)
    for name, param in adapted.named_parameters():
        param.requires_grad = "lora_" in name
    return adapted


def merge(model: nn.Module) -> nn.Module:
    """Fold every LoRA adapter into its base weight and drop the adapters: a plain model again."""
    from peft.tuners.lora import LoraLayer

    for name, module in list(model.named_modules()):
        if isinstance(module, LoraLayer):
            module.merge()
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, module.get_base_layer())
    return model


def freeze(backbone: nn.Module, cfg: AdaptConfig) -> None:
    """Fix the parameters `cfg.freeze` names (the task head lives outside `backbone`)."""
    if cfg.freeze is Freeze.none:
        return
    if cfg.freeze is Freeze.backbone:
        for param in backbone.parameters():
            param.requires_grad = False
        return
    frozen = r"(.*\.)?(embeddings|encoder_embeddings|decoder_embeddings)\..*"
    if cfg.freeze is Freeze.bottom:
        below = "|".join(str(i) for i in range(cfg.freeze_layers)) or "-"
        frozen += rf"|(.*\.)?layers\.({below})\..*"
    for name, param in backbone.named_parameters():
        if re.fullmatch(frozen, name):
            param.requires_grad = False


def trainable_parameters(model: nn.Module) -> int:
    """Parameters the optimizer updates; a tied matrix counts once."""
    unique = {id(p): p for p in model.parameters() if p.requires_grad}
    return sum(p.numel() for p in unique.values())
