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
from torch import Tensor, nn

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


def _chunk_pass(rows: Tensor, out: Tensor | None, safe: Tensor, counted: Tensor, label_smoothing: float):
    """One chunk of float32 logits `rows` `(n, V)`: each row's log-sum-exp, argmax and (with label
    smoothing) mean logit, `(n, 1)` each; with `out` given, it also writes there the gradient of each
    row's smoothed loss, `softmax - smoothed one-hot`, zero on uncounted rows. `out` may be `rows`
    itself (logits nobody else reads, overwritten in place)."""
    mean_logit = rows.mean(-1, keepdim=True) if label_smoothing else None
    top, top_index = rows.max(-1, keepdim=True)
    probs = torch.sub(rows, top, out=out)  # a temporary where no gradient is asked
    total = probs.exp_().sum(-1, keepdim=True)  # probs holds exp(x - max) now
    lse = total.log().add_(top)
    if out is not None:
        # d loss_i / d x_c = p_c - (1 - eps) [c = t] - eps / V, and 0 on ignored rows.
        probs.div_(total)
        probs.scatter_add_(-1, safe, torch.full(safe.shape, label_smoothing - 1.0, device=rows.device))
        if label_smoothing:
            probs.sub_(label_smoothing / rows.shape[-1])
        probs.mul_(counted[:, None])
    return lse, top_index, mean_logit


def _sums(lse: list[Tensor], target_logit: Tensor, mean_logit: list, counted: Tensor, label_smoothing: float):
    """The smoothed loss sum and the plain NLL sum over counted rows, from the per-chunk pieces."""
    lse_all = torch.cat(lse).squeeze(-1)  # (N,)
    nll_sum = ((lse_all - target_logit) * counted).sum()
    loss_sum = nll_sum.clone()  # a separate output: nll_sum is marked non-differentiable
    if label_smoothing:
        uniform = (lse_all - torch.cat(mean_logit).squeeze(-1)) * counted  # mean_c(-log p_c)
        loss_sum = (1 - label_smoothing) * nll_sum + label_smoothing * uniform.sum()
    return loss_sum, nll_sum


class _GradientsInForward(torch.autograd.Function):
    """Forward computes the gradients of the loss sum and keeps them (`keep`); backward multiplies
    them by the incoming scalar, in place, so it may run only once."""

    @staticmethod
    def keep(ctx, name: str, n_inputs: int, grads: tuple, dtypes: tuple) -> None:
        ctx.save_for_backward(*(torch.empty(0) if g is None else g for g in grads))
        ctx.has, ctx.dtypes = tuple(g is not None for g in grads), dtypes
        ctx.name, ctx.n_inputs, ctx.consumed = name, n_inputs, False

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor, _grad_argmax: Tensor):
        if ctx.consumed:
            raise RuntimeError(f"{ctx.name}: backward through the same loss twice is not supported")
        ctx.consumed = True
        grads = [
            g.mul_(grad_loss).to(dtype) if has else None
            for g, dtype, has in zip(ctx.saved_tensors, ctx.dtypes, ctx.has)
        ]
        return *grads, *[None] * (ctx.n_inputs - len(grads))


class _FusedCrossEntropy(_GradientsInForward):
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
            rows = slice(start, start + CHUNK_ROWS)
            out = grad[rows] if with_grad else None
            pieces = _chunk_pass(logits[rows].float(), out, safe[rows], counted[rows], label_smoothing)
            lse.append(pieces[0])
            argmax.append(pieces[1])
            mean_logit.append(pieces[2])
        target_logit = logits.gather(-1, safe).squeeze(-1).float()
        loss_sum, nll_sum = _sums(lse, target_logit, mean_logit, counted, label_smoothing)
        _GradientsInForward.keep(ctx, "token_cross_entropy", 3, (grad,), (logits.dtype,))
        predictions = torch.cat(argmax).squeeze(-1)
        ctx.mark_non_differentiable(nll_sum, predictions)
        return loss_sum, nll_sum, predictions


class _FusedLinearCrossEntropy(_GradientsInForward):
    """`_FusedCrossEntropy` of `hidden @ weight.T + bias` without the `(N, V)` logits: each chunk's
    logits are projected, turned in place into their gradient, and at once into the gradients of
    hidden, weight and bias (two matmuls), which backward multiplies by the incoming scalar."""

    @staticmethod
    def forward(
        ctx, hidden, weight, bias, targets, label_smoothing: float, chunk: int, softcap: float | None
    ):
        counted = targets != IGNORE_INDEX  # (N,)
        safe = targets.clamp(min=0)[:, None]  # (N, 1)
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        need_b = bias is not None and ctx.needs_input_grad[2]
        with_grad = need_h or need_w or need_b
        # Under autocast the projections run in its dtype (bf16), as the head's matmul would; the
        # softmax, the loss and the kept gradients are float32 either way.
        device = hidden.device.type
        compute = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else torch.float32
        low = compute is not torch.float32
        grad_h = torch.empty(hidden.shape, dtype=torch.float32, device=hidden.device) if need_h else None
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_w else None
        grad_b = torch.zeros(weight.shape[0], dtype=torch.float32, device=weight.device) if need_b else None
        lse, argmax, target_logit, mean_logit = [], [], [], []
        with torch.autocast(device, enabled=False):
            w = weight.to(compute)
            b = None if bias is None else bias.float()
            for start in range(0, max(hidden.shape[0], 1), chunk):  # once even for no rows
                rows = slice(start, start + chunk)
                h = hidden[rows].to(compute)  # (n, D)
                if low:
                    logits = (h @ w.t()).float()
                    logits = logits if b is None else logits.add_(b)
                else:
                    logits = h @ w.t() if b is None else torch.addmm(b, h, w.t())  # (n, V)
                slope = None
                if softcap is not None:  # capped = c * tanh(raw / c), in place; d capped / d raw = 1 - tanh^2
                    tanh = logits.div_(softcap).tanh_()
                    slope = 1.0 - tanh * tanh if with_grad else None
                    logits = tanh.mul_(softcap)
                target_logit.append(logits.gather(-1, safe[rows]))
                pieces = _chunk_pass(
                    logits, logits if with_grad else None, safe[rows], counted[rows], label_smoothing
                )
                lse.append(pieces[0])
                argmax.append(pieces[1])
                mean_logit.append(pieces[2])
                if not with_grad:
                    continue
                # logits hold their gradient now: turn it into those of hidden, weight and bias
                if slope is not None:
                    logits.mul_(slope)  # through the cap: the gradient of the raw logits
                g = logits.to(compute)
                if need_h:
                    if low:
                        grad_h[rows] = g @ w
                    else:
                        torch.mm(g, w, out=grad_h[rows])
                if need_w:
                    if low:
                        grad_w.add_(g.t() @ h)
                    else:
                        grad_w.addmm_(g.t(), h)
                if need_b:
                    grad_b.add_(logits.sum(0))
        loss_sum, nll_sum = _sums(
            lse, torch.cat(target_logit).squeeze(-1), mean_logit, counted, label_smoothing
        )
        dtypes = (hidden.dtype, weight.dtype, None if bias is None else bias.dtype)
        _GradientsInForward.keep(ctx, "linear_cross_entropy", 7, (grad_h, grad_w, grad_b), dtypes)
        predictions = torch.cat(argmax).squeeze(-1)
        ctx.mark_non_differentiable(nll_sum, predictions)
        return loss_sum, nll_sum, predictions


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


def linear_cross_entropy(
    hidden: Tensor,  # (N, D)
    weight: Tensor,  # (V, D)
    bias: Tensor | None,  # (V,)
    targets: Tensor,  # (N,), IGNORE_INDEX where nothing is predicted
    label_smoothing: float = 0.0,
    chunk: int = CHUNK_ROWS,
    softcap: float | None = None,
) -> TokenLoss:
    """`token_cross_entropy(F.linear(hidden, weight, bias), targets, label_smoothing)` without the
    (N, V) logits: the same TokenLoss, its loss carrying the gradients of hidden, weight and bias.
    With `softcap` c the logits are first c * tanh(logits / c), as the head computes them."""
    if chunk < 1:
        raise ConfigError(f"objective.loss_chunk: got {chunk}, expected rows per chunk >= 1 or null")
    counted = targets != IGNORE_INDEX
    n_tokens = counted.sum()
    loss_sum, nll_sum, predictions = _FusedLinearCrossEntropy.apply(
        hidden, weight, bias, targets, label_smoothing, chunk, softcap
    )
    n_correct = ((predictions == targets) & counted).sum()
    return TokenLoss(loss_sum / n_tokens.clamp(min=1), nll_sum.detach(), n_tokens, n_correct, predictions)


def head_cross_entropy(
    head: nn.Module,  # an LMHead: optional scale and transform, then the projection `proj`
    hidden: Tensor,  # (N, d_model) the states the head reads
    targets: Tensor,  # (N,)
    label_smoothing: float = 0.0,
    chunk: int = CHUNK_ROWS,
) -> TokenLoss:
    """`token_cross_entropy(head(hidden), targets, label_smoothing)`, the projection fused with the
    loss `chunk` rows at a time (`linear_cross_entropy`): no (N, V) logits."""
    if head.scale is not None:
        hidden = hidden * head.scale
    if head.transform is not None:
        hidden = head.transform(hidden)
    w, b = head.proj.weight, head.proj.bias
    return linear_cross_entropy(hidden, w, b, targets, label_smoothing, chunk, getattr(head, "softcap", None))


def ratio(numerator: Tensor, denominator: Tensor) -> Tensor:
    """`numerator / denominator` as float, 0 when the denominator is 0 (an empty batch)."""
    return numerator.float() / denominator.clamp(min=1).float()
