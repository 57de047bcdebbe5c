"""Distillation as an objective: a pretraining objective plus a frozen teacher (Sanh et al. 2019).

    loss = alpha_ce * KL(softmax(t / T) || softmax(s / T)) * T^2      soft targets (Hinton et al. 2015)
         + alpha_task * task loss                                      MLM (+ NSP) or causal LM, unchanged
         + alpha_cos * mean(1 - cos(h_s, h_t))                         last hidden states

The task objective runs as it does in pretraining, on a `Recorder` of the student that keeps the
student call's arguments; the teacher then gets exactly those arguments. For MLM that includes
`predict_mask`, so both models return sparse `(N, V)` logits of the same masked positions in the same
order, and the KL and cosine run over those positions; for the causal LM they run over every real
token (`attention_mask`), or every position without one. The T^2 factor keeps the soft-target
gradients at the same scale whatever the temperature (Hinton et al. 2015, section 2).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lmforge.errors import ConfigError


@dataclass
class Call:
    """One call of the student: its arguments, also by name (defaults left out), and its output."""

    arguments: dict[str, Any]
    args: tuple
    kwargs: dict[str, Any]
    output: Any


class Recorder:
    """The student as the task objective sees it: calls and attributes pass through; calls are kept."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.calls: list[Call] = []

    def __call__(self, *args, **kwargs):
        output = self.model(*args, **kwargs)
        self.calls.append(Call(named_arguments(self.model, args, kwargs), args, kwargs, output))
        return output

    def __getattr__(self, name: str):
        return getattr(self.model, name)  # model.config, model.training, ...


class Distillation(nn.Module):
    """`objective(model, batch) -> (loss, stats)`: the task objective's loss plus the teacher's soft targets.

    The teacher is frozen, kept in eval mode and run without gradients. It is held outside the module
    tree, so it is in neither `parameters()` (no optimizer state) nor `state_dict()` (no checkpoint
    weight), and `.train()` / `.to()` on this module leave it alone; it follows the student's device
    when first called. The task objective is a submodule: its heads (NSP) train and are saved.
    Stats: the task objective's, with `loss` = the total, plus task_loss, distill_kl, distill_cos.
    """

    def __init__(
        self,
        task_objective: nn.Module,
        teacher: nn.Module,
        temperature: float = 2.0,
        alpha_ce: float = 5.0,
        alpha_task: float = 2.0,
        alpha_cos: float = 1.0,
    ) -> None:
        super().__init__()
        if temperature <= 0:
            raise ConfigError(f"distill.temperature: got {temperature}, expected a number > 0")
        self.task = task_objective
        # The soft targets compare the student's logits with the teacher's, from the one model call
        # the task objective makes: it reads the model's logits instead of fusing the head into its
        # loss (objective.loss_chunk, objectives/losses.py), in training and in validation alike.
        if getattr(task_objective, "loss_chunk", None) is not None:
            task_objective.loss_chunk = None
        self.temperature = float(temperature)
        self.alpha_ce, self.alpha_task, self.alpha_cos = float(alpha_ce), float(alpha_task), float(alpha_cos)
        object.__setattr__(self, "_teacher", teacher.eval().requires_grad_(False))  # not a submodule

    @property
    def teacher(self) -> nn.Module:
        return self._teacher

    def forward(self, model: nn.Module, batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        recorder = Recorder(model)
        task_loss, stats = self.task(recorder, batch)
        if len(recorder.calls) != 1:
            raise RuntimeError(
                f"distillation expects the task objective to call the model once, got {len(recorder.calls)}"
            )
        call = recorder.calls[0]
        student = call.output
        if self.alpha_ce or self.alpha_cos:
            teacher = self._teacher_output(call, student.logits.device)
            where = positions(call.arguments, student.last_hidden_state)  # (B, T) bool
            (s, weights), (t, _) = rows(student.logits, where), rows(teacher.logits, where)
            kl = soft_target_kl(s, t, self.temperature, weights)
            cos = self._cosine(student.last_hidden_state[where], teacher.last_hidden_state[where])
        else:  # no term needs the teacher (the scratch control): its forward pass is skipped
            kl = cos = task_loss.new_zeros(())
        loss = self.alpha_ce * kl + self.alpha_task * task_loss + self.alpha_cos * cos
        stats = {
            **stats,
            "task_loss": task_loss.detach(),
            "distill_kl": kl.detach(),
            "distill_cos": cos.detach(),
            "loss": loss.detach(),
        }
        return loss, stats

    def _teacher_output(self, call: Call, device: torch.device):
        """The teacher's output for the student's very arguments, without a graph."""
        if next(self.teacher.parameters()).device != device:
            self.teacher.to(device)
        with torch.no_grad():
            return self.teacher(*call.args, **call.kwargs)

    def _cosine(self, student: Tensor, teacher: Tensor) -> Tensor:
        """mean(1 - cos) over the selected rows (N, d); zero without weight when the widths differ."""
        if student.shape[-1] != teacher.shape[-1]:
            if self.alpha_cos:
                raise ConfigError(
                    f"distill.alpha_cos: got {self.alpha_cos} with student width {student.shape[-1]} and "
                    f"teacher width {teacher.shape[-1]}, expected 0 (the cosine compares equal widths)"
                )
            return student.new_zeros(())
        distance = 1.0 - F.cosine_similarity(upcast(student), upcast(teacher), dim=-1)  # (N,)
        return distance.sum() / max(len(distance), 1)


def named_arguments(model: nn.Module, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments by parameter name; positional ones are named from the model's forward."""
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in inspect.signature(model.forward).parameters.values() if p.kind in positional]
    return {**dict(zip(names, args)), **kwargs}


def positions(arguments: Mapping[str, Any], hidden: Tensor) -> Tensor:
    """The positions that carry loss (B, T): predict_mask (MLM), else real tokens, else all of them."""
    for name in ("predict_mask", "attention_mask"):
        mask = arguments.get(name)
        if mask is not None:
            return mask.bool()
    return torch.ones(hidden.shape[:2], dtype=torch.bool, device=hidden.device)


def rows(logits: Tensor, where: Tensor) -> tuple[Tensor, Tensor | None]:
    """(N, V) rows and their weights: dense (B, T, V) logits flattened with the positions as 0/1
    weights (no boolean indexing: its backward is a slow scatter over the whole vocabulary on CPU),
    sparse ones (already the selected rows) as they are."""
    if logits.dim() == 3:
        return logits.flatten(0, 1), where.flatten().to(torch.float32)
    return logits, None


CHUNK = 1 << 20  # elements per chunk (4 MB in float32): each chunk's passes stay in the CPU's cache


class _SoftTargetKL(torch.autograd.Function):
    """sum_i w_i KL(softmax(t_i / T) || softmax(s_i / T)) * T^2, chunked over rows, with its gradient
    T (softmax(s / T) - softmax(t / T)) w_i computed in the same pass: one read of the logits instead
    of the eight full-size passes of log_softmax + kl_div and their backward."""

    @staticmethod
    def forward(ctx, student: Tensor, teacher: Tensor, weights: Tensor, temperature: float) -> Tensor:
        n, vocab = student.shape
        dtype = torch.promote_types(student.dtype, torch.float32)  # half precision loses the KL's detail
        grad = torch.empty(student.shape, dtype=dtype, device=student.device)
        total = torch.zeros((), dtype=torch.float64, device=student.device)
        step = max(1, CHUNK // max(vocab, 1))
        for start in range(0, n, step):
            end = min(n, start + step)
            log_q = F.log_softmax(student[start:end].to(dtype) / temperature, dim=-1)
            log_p = F.log_softmax(teacher[start:end].to(dtype) / temperature, dim=-1)
            p = log_p.exp()
            w = weights[start:end].to(dtype)
            per_row = torch.linalg.vecdot(p, log_p.sub_(log_q))  # KL of each row
            total += (per_row * w).sum().to(torch.float64)
            torch.sub(log_q.exp_(), p, out=grad[start:end]).mul_((w * temperature)[:, None])
        ctx.save_for_backward(grad)
        ctx.dtype = student.dtype
        return (total * temperature**2).to(dtype)

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        (grad,) = ctx.saved_tensors
        return (grad * grad_output).to(ctx.dtype), None, None, None


def soft_target_kl(
    student: Tensor, teacher: Tensor, temperature: float, weights: Tensor | None = None
) -> Tensor:
    """KL(softmax(teacher / T) || softmax(student / T)) * T^2, averaged over the rows of (N, V) logits
    (over the rows of weight 1 when 0/1 `weights` are given). The teacher gets no gradient."""
    if student.shape != teacher.shape:
        raise ConfigError(
            f"distill: student logits {tuple(student.shape)} and teacher logits {tuple(teacher.shape)} "
            "differ, expected one vocabulary"
        )
    if weights is None:
        weights = torch.ones(len(student), dtype=torch.float32, device=student.device)
    total = _SoftTargetKL.apply(student, teacher.detach(), weights, float(temperature))
    return total / weights.sum().clamp(min=1)


def upcast(x: Tensor) -> Tensor:
    """At least float32 (half-precision logits lose the small differences the KL measures)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))
