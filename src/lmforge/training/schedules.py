"""Learning-rate schedules as `LambdaLR` multipliers of the base learning rate.

Each schedule is a small picklable callable `f(i) -> multiplier`, where `i` counts the scheduler
steps already taken (LambdaLR starts at 0 and we step once per optimizer update), so update number
`s = i + 1` (1-based) runs at `base_lr * f(s - 1)`. Warmup is linear and reaches the peak at
`s = warmup_steps`:

    noam      Vaswani et al. 2017, eq. (3): factor * d_model^-0.5 * min(s^-0.5, s * warmup^-1.5).
              The multiplier *is* the paper's learning rate, so set the optimizer's base lr to 1.0
              (optionally with `factor`) to reproduce it; base lr 1.0, d_model 512, warmup 4000
              peaks at 512^-0.5 * 4000^-0.5 ~= 7.0e-4. Any other base lr scales the whole curve.
    linear    warmup, then linear decay to `min_lr_ratio` at s = total_steps (BERT, Devlin et al. 2018)
    cosine    warmup, then half a cosine down to `min_lr_ratio` at s = total_steps (Loshchilov &
              Hutter 2017 without restarts; GPT-3, Chinchilla)
    constant  warmup, then the base lr
    wsd       warmup, then the base lr (stable), then a linear decay to `min_lr_ratio` over the last
              `decay_fraction` of the steps (warmup-stable-decay, Hu et al. 2024, MiniCPM; the
              speedrun's trapezoid): the stable phase can be extended and decayed from at any step

After `total_steps` the decaying schedules stay at their floor. A schedule is a pure function of
the step: checkpoints keep the step, never the schedule's settings, so a run resumed with a larger
`trainer.max_steps` follows the new schedule from the step it stopped at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from lmforge.errors import ConfigError


def _warmup(s: int, warmup_steps: int) -> float:
    """Linear ramp s / warmup (1 at s = warmup), 1 afterwards and when there is no warmup."""
    return s / warmup_steps if s < warmup_steps else 1.0


@dataclass(frozen=True)
class NoamSchedule:
    d_model: int  # model width; the peak scales as d_model^-0.5
    warmup_steps: int  # updates of linear warmup before the s^-0.5 decay
    factor: float = 1.0  # extra constant multiplier (the Annotated Transformer uses 1 or 2)

    def __call__(self, i: int) -> float:
        s = i + 1
        return self.factor * self.d_model**-0.5 * min(s**-0.5, s * self.warmup_steps**-1.5)


@dataclass(frozen=True)
class LinearSchedule:
    warmup_steps: int  # updates of linear warmup from base_lr / warmup to base_lr
    total_steps: int  # update at which the decay reaches min_lr_ratio
    min_lr_ratio: float = 0.0  # floor, as a fraction of base_lr

    def __call__(self, i: int) -> float:
        s = i + 1
        if s < self.warmup_steps:
            return _warmup(s, self.warmup_steps)
        progress = min((s - self.warmup_steps) / (self.total_steps - self.warmup_steps), 1.0)
        return 1.0 - (1.0 - self.min_lr_ratio) * progress


@dataclass(frozen=True)
class CosineSchedule:
    warmup_steps: int  # updates of linear warmup from base_lr / warmup to base_lr
    total_steps: int  # update at which the cosine reaches min_lr_ratio
    min_lr_ratio: float = 0.1  # floor, as a fraction of base_lr (Chinchilla decays 10x)

    def __call__(self, i: int) -> float:
        s = i + 1
        if s < self.warmup_steps:
            return _warmup(s, self.warmup_steps)
        progress = min((s - self.warmup_steps) / (self.total_steps - self.warmup_steps), 1.0)
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class ConstantSchedule:
    warmup_steps: int  # updates of linear warmup, then constant base_lr

    def __call__(self, i: int) -> float:
        return _warmup(i + 1, self.warmup_steps)


@dataclass(frozen=True)
class WSDSchedule:
    warmup_steps: int  # updates of linear warmup from base_lr / warmup to base_lr
    total_steps: int  # update at which the decay reaches min_lr_ratio
    decay_fraction: float = 0.2  # share of total_steps spent decaying (the last ones)
    min_lr_ratio: float = 0.0  # floor, as a fraction of base_lr

    def __call__(self, i: int) -> float:
        s = i + 1
        decay_steps = max(1, round(self.decay_fraction * self.total_steps))
        stable_end = self.total_steps - decay_steps  # last update at the base lr
        if s < self.warmup_steps and s <= stable_end:
            return _warmup(s, self.warmup_steps)
        if s <= stable_end:
            return 1.0
        progress = min((s - stable_end) / decay_steps, 1.0)
        return 1.0 - (1.0 - self.min_lr_ratio) * progress


SCHEDULES: dict[str, type] = {
    "noam": NoamSchedule,
    "linear": LinearSchedule,
    "cosine": CosineSchedule,
    "constant": ConstantSchedule,
    "wsd": WSDSchedule,
}


def make_schedule(name: str, warmup_steps: int, total_steps: int | None = None, **kwargs: Any):
    """The multiplier function `f(i)` for schedule `name`; every bad argument is a one-line ConfigError."""
    if name not in SCHEDULES:
        raise ConfigError(f"scheduler name={name!r}: expected one of {', '.join(SCHEDULES)}")
    if not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise ConfigError(f"warmup_steps={warmup_steps!r}: expected an integer >= 0")
    allowed = {
        "noam": {"d_model", "factor"},
        "linear": {"min_lr_ratio"},
        "cosine": {"min_lr_ratio"},
        "wsd": {"min_lr_ratio", "decay_fraction"},
    }
    unknown = set(kwargs) - allowed.get(name, set())
    if unknown:
        expected = ", ".join(sorted(allowed.get(name, set()))) or "none"
        raise ConfigError(
            f"scheduler {name!r} options {sorted(unknown)}: not accepted (expected: {expected})"
        )
    if "decay_fraction" in kwargs and not 0.0 < kwargs["decay_fraction"] <= 1.0:
        raise ConfigError(f"decay_fraction={kwargs['decay_fraction']}: expected a share in (0, 1]")
    if "min_lr_ratio" in kwargs and not 0.0 <= kwargs["min_lr_ratio"] <= 1.0:
        raise ConfigError(f"min_lr_ratio={kwargs['min_lr_ratio']}: expected a fraction in [0, 1]")

    if name == "noam":
        if warmup_steps < 1:
            raise ConfigError(f"warmup_steps={warmup_steps}: noam expects warmup_steps >= 1")
        if not isinstance(kwargs.get("d_model"), int) or kwargs["d_model"] < 1:
            raise ConfigError(
                f"d_model={kwargs.get('d_model')!r}: noam expects the model width, an integer >= 1"
            )
        return NoamSchedule(warmup_steps=warmup_steps, **kwargs)
    if name == "constant":
        return ConstantSchedule(warmup_steps)
    if not isinstance(total_steps, int) or total_steps <= warmup_steps:
        raise ConfigError(
            f"total_steps={total_steps!r}: {name} expects an integer > warmup_steps={warmup_steps}"
        )
    return SCHEDULES[name](warmup_steps, total_steps, **kwargs)


class StepSchedule(LambdaLR):
    """`LambdaLR` whose state is the step alone: LambdaLR would also save and restore the schedule
    object's fields (its `total_steps`), silently overriding the configured schedule on resume."""

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.pop("lr_lambdas", None)
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = {k: v for k, v in state_dict.items() if k != "lr_lambdas"}
        state["lr_lambdas"] = [None] * len(self.lr_lambdas)
        super().load_state_dict(state)  # the step comes back; the multipliers stay the configured ones


def build_scheduler(
    optimizer: Optimizer, name: str, warmup_steps: int, total_steps: int | None = None, **kwargs: Any
) -> LambdaLR:
    """A `StepSchedule` over every param group, to be stepped once per optimizer update.

    `kwargs`: `d_model` (required) and `factor` for noam; `min_lr_ratio` for linear, cosine and
    wsd; `decay_fraction` for wsd.
    """
    return StepSchedule(optimizer, make_schedule(name, warmup_steps, total_steps, **kwargs))
