"""Token-level cross entropy with the sums an epoch needs for exact per-token averages.

Label smoothing (Szegedy et al. 2016; used by Vaswani et al. 2017 with epsilon 0.1) changes the
training loss only: `F.cross_entropy(..., label_smoothing=eps)` is `(1 - eps) * NLL + eps * mean_c(-log p_c)`.
Perplexity is always reported from the plain NLL, exp(sum NLL / number of tokens), so `nll_sum` is
computed without smoothing and summed over tokens, never averaged per batch.

`token_cross_entropy` is one fused pass over the logits (Liger-Kernel's and Unsloth's idea, in plain
PyTorch): for each chunk of rows, while it is in cache, it takes the max and argmax (accuracy), the
log-sum-exp (loss) and the softmax, from which the gradient `softmax - smoothed one-hot` is written
in place. Autograd's `log_softmax` + `nll_loss` makes about six passes over the (N, V) logits for the
same numbers (log-probabilities out, a zero-filled one-hot gradient, its scatter, the softmax
backward, a separate argmax); on the vocabulary-sized logits of a small model that was ~10% of the
step (`benchmarks/train_step.py`). The values equal `F.cross_entropy` to float rounding
(tests/objectives/test_objective_losses.py).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from lmforge.errors import ConfigError
from lmforge.objectives.masking import IGNORE_INDEX

CHUNK_ROWS = 64  # rows per pass: 64 x 8192 fp32 logits = 2 MiB, about one core's L2


class TokenLoss(NamedTuple):
    loss: Tensor  # 0-dim, mean over counted tokens, label-smoothed; carries the gradient
    nll_sum: Tensor  # 0-dim float32, sum of unsmoothed NLL over counted tokens (detached)
    n_tokens: Tensor  # 0-dim long, tokens whose target is not IGNORE_INDEX
    n_correct: Tensor  # 0-dim long, counted tokens whose argmax equals the target
    predictions: Tensor  # (N,) long, the argmax of each row (detached)

    def stats(self) -> dict[str, Tensor]:
        """The detached stats every objective reports: loss, accuracy and the sums behind them."""
        return {
            "loss": self.loss.detach(),
            "accuracy": ratio(self.n_correct, self.n_tokens),
            "n_tokens": self.n_tokens,
            "nll_sum": self.nll_sum,
            "n_correct": self.n_correct,
        }


def check_label_smoothing(value: float) -> float:
    if not 0.0 <= value < 1.0:
        raise ConfigError(f"label_smoothing={value}: expected a value in [0, 1)")
    return float(value)


class _FusedCrossEntropy(torch.autograd.Function):
    """Sums over counted rows of the smoothed loss and of the plain NLL, and each row's argmax.

    Forward computes the gradient of the smoothed sum too (when the logits require it) and keeps it
    instead of the logits, so backward is one multiply by the incoming scalar.
    """

    @staticmethod
    def forward(ctx, logits: Tensor, targets: Tensor, label_smoothing: float):
        counted = targets != IGNORE_INDEX  # (N,)
        safe = targets.clamp(min=0)[:, None]  # (N, 1) any valid index where ignored
        with_grad = ctx.needs_input_grad[0]
        grad = torch.empty(logits.shape, dtype=torch.float32, device=logits.device) if with_grad else None
        lse, argmax, mean_logit = [], [], []
        for start in range(0, max(logits.shape[0], 1), CHUNK_ROWS):  # once even for no rows
            rows = logits[start : start + CHUNK_ROWS].float()  # (n, V)
            top, top_index = rows.max(-1, keepdim=True)
            probs = torch.sub(rows, top, out=grad[start : start + CHUNK_ROWS] if with_grad else None)
            total = probs.exp_().sum(-1, keepdim=True)  # probs holds exp(x - max) now
            if with_grad:
                probs.div_(total)  # softmax
            lse.append(total.log_().add_(top))
            argmax.append(top_index)
            if label_smoothing:
                mean_logit.append(rows.mean(-1, keepdim=True))
        lse_all = torch.cat(lse).squeeze(-1)  # (N,)
        nll = (lse_all - logits.gather(-1, safe).squeeze(-1).float()) * counted  # (N,)
        nll_sum = nll.sum()
        loss_sum = nll_sum.clone()  # a separate output: nll_sum is marked non-differentiable
        if label_smoothing:
            uniform = (lse_all - torch.cat(mean_logit).squeeze(-1)) * counted  # mean_c(-log p_c)
            loss_sum = (1 - label_smoothing) * nll_sum + label_smoothing * uniform.sum()
        if with_grad:
            # d loss_i / d x_c = p_c - (1 - eps) [c = t] - eps / V, and 0 on ignored rows.
            grad.scatter_add_(-1, safe, -(1 - label_smoothing) * counted[:, None].float())
            if label_smoothing:
                grad.sub_(label_smoothing / logits.shape[-1])
            grad.mul_(counted[:, None])
            ctx.save_for_backward(grad)
        ctx.logits_dtype, ctx.consumed = logits.dtype, False
        predictions = torch.cat(argmax).squeeze(-1)
        ctx.mark_non_differentiable(nll_sum, predictions)
        return loss_sum, nll_sum, predictions

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor, _grad_argmax: Tensor):
        if ctx.consumed:
            raise RuntimeError("token_cross_entropy: backward through the same loss twice is not supported")
        ctx.consumed = True
        (grad,) = ctx.saved_tensors
        return grad.mul_(grad_loss).to(ctx.logits_dtype), None, None


def token_cross_entropy(logits: Tensor, targets: Tensor, label_smoothing: float = 0.0) -> TokenLoss:
    """Cross entropy of `logits` `(N, V)` against `targets` `(N,)`, skipping IGNORE_INDEX targets.

    The mean divides by the number of counted tokens (at least 1), so a batch with nothing to
    predict gives a zero loss that still backpropagates instead of NaN. Only the loss carries a
    gradient, and only once: `backward` may not be called twice through it.
    """
    counted = targets != IGNORE_INDEX  # (N,)
    n_tokens = counted.sum()
    loss_sum, nll_sum, predictions = _FusedCrossEntropy.apply(logits, targets, label_smoothing)
    n_correct = ((predictions == targets) & counted).sum()
    return TokenLoss(
        loss_sum / n_tokens.clamp(min=1), nll_sum.detach(), n_tokens, n_correct, predictions.detach()
    )


def ratio(numerator: Tensor, denominator: Tensor) -> Tensor:
    """`numerator / denominator` as float, 0 when the denominator is 0 (an empty batch)."""
    return numerator.float() / denominator.clamp(min=1).float()
