"""The fused linear + cross-entropy on the default decoder's training step: tried, measured.

    python -m benchmarks --only linear_ce      # about 40 seconds on a 2-core CPU

The default decoder (dvc.yaml's `families`: 2 layers x 64 wide, 8,192-entry BPE, batches of 32 x 128)
spends most of its counted FLOPs in the vocabulary projection, and the step materialises its
4,096 x 8,192 logits and their gradient (128 MiB each) in full. A fused linear + cross-entropy
(Liger-Kernel's `FusedLinearCrossEntropy`, Wijmans et al. 2024 "Cut your losses") never holds them:
for each chunk of rows it projects the hidden states, takes the log-sum-exp, the argmax and the
softmax, writes the gradient of that chunk's logits in place and turns it at once into the
gradients of the hidden states and of the projection (two matmuls), so the logits of only one chunk
exist at a time. The forward pass leaves the gradients ready, as `objectives/losses.py` does.

`linear_cross_entropy` below is that op in plain PyTorch; its values and gradients equal
`F.linear` + `F.cross_entropy` to float rounding (tests/test_linear_ce.py). The benchmark runs the
default decoder's whole training step (the time_to_quality benchmark's `training_step`: collation,
forward, backward, clipping, AdamW, schedule) with the stage's objective (the model's head, then
`token_cross_entropy`) and with this op at several chunk sizes, interleaved in one process; the
ratio is seconds per step of the stage's objective over the op's. The op is not wired into the
objectives: every pretraining, fine-tuning and scaling stage reads them, so it would enter with a
rerun of all of them, and what it buys is written in docs/pretraining.md.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmarks.common import Row, interleave, median
from benchmarks.time_to_quality import plan_of, recipes, training_step
from lmforge.objectives.losses import TokenLoss
from lmforge.objectives.masking import IGNORE_INDEX

CHUNKS = (64, 128, 256, 512, 1024)  # rows per chunk: 1,024 x 8,192 fp32 logits are 32 MiB


class _FusedLinearCrossEntropy(torch.autograd.Function):
    """Sums over counted rows of the smoothed loss and of the plain NLL of `hidden @ weight.T + bias`,
    each row's argmax, and (when asked) the gradients of the smoothed sum, kept for backward."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, label_smoothing: float, chunk: int):
        n, vocab = hidden.shape[0], weight.shape[0]
        counted = targets != IGNORE_INDEX  # (N,)
        safe = targets.clamp(min=0)[:, None]  # (N, 1) any valid index where ignored
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        need_b = bias is not None and ctx.needs_input_grad[2]
        w = weight.float()
        b = None if bias is None else bias.float()
        grad_h = torch.empty(hidden.shape, dtype=torch.float32, device=hidden.device) if need_h else None
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_w else None
        grad_b = torch.zeros(vocab, dtype=torch.float32, device=weight.device) if need_b else None
        lse, argmax, target_logit, mean_logit = [], [], [], []
        for start in range(0, max(n, 1), chunk):  # once even for no rows
            rows = slice(start, start + chunk)
            h = hidden[rows].float()  # (n, D)
            logits = h @ w.t() if b is None else torch.addmm(b, h, w.t())  # (n, V)
            target_logit.append(logits.gather(-1, safe[rows]))
            if label_smoothing:
                mean_logit.append(logits.mean(-1, keepdim=True))
            top, top_index = logits.max(-1, keepdim=True)
            probs = logits.sub_(top).exp_()  # exp(x - max), in place
            total = probs.sum(-1, keepdim=True)
            lse.append(total.log().add_(top))
            argmax.append(top_index)
            if need_h or need_w or need_b:
                # d loss_i / d x_c = p_c - (1 - eps) [c = t] - eps / V, and 0 on ignored rows.
                probs.div_(total)
                probs.scatter_add_(-1, safe[rows], torch.full(safe[rows].shape, label_smoothing - 1.0))
                if label_smoothing:
                    probs.sub_(label_smoothing / vocab)
                probs.mul_(counted[rows, None])
                if need_h:
                    torch.mm(probs, w, out=grad_h[rows])
                if need_w:
                    grad_w.addmm_(probs.t(), h)
                if need_b:
                    grad_b.add_(probs.sum(0))
        lse_all = torch.cat(lse).squeeze(-1)  # (N,)
        nll_sum = ((lse_all - torch.cat(target_logit).squeeze(-1)) * counted).sum()
        loss_sum = nll_sum.clone()  # a separate output: nll_sum is marked non-differentiable
        if label_smoothing:
            uniform = (lse_all - torch.cat(mean_logit).squeeze(-1)) * counted  # mean_c(-log p_c)
            loss_sum = (1 - label_smoothing) * nll_sum + label_smoothing * uniform.sum()
        empty = torch.empty(0)
        ctx.save_for_backward(*(empty if g is None else g for g in (grad_h, grad_w, grad_b)))
        ctx.dtypes = (hidden.dtype, weight.dtype, None if bias is None else bias.dtype)
        ctx.has = (need_h, need_w, need_b)
        predictions = torch.cat(argmax).squeeze(-1)
        ctx.mark_non_differentiable(nll_sum, predictions)
        return loss_sum, nll_sum, predictions

    @staticmethod
    def backward(ctx, grad_loss: Tensor, _grad_nll: Tensor, _grad_argmax: Tensor):
        grads = [
            g.mul_(grad_loss).to(dtype) if has else None
            for g, dtype, has in zip(ctx.saved_tensors, ctx.dtypes, ctx.has)
        ]
        return *grads, None, None, None


def linear_cross_entropy(
    hidden: Tensor,  # (N, D)
    weight: Tensor,  # (V, D)
    bias: Tensor | None,  # (V,)
    targets: Tensor,  # (N,), IGNORE_INDEX where nothing is predicted
    label_smoothing: float = 0.0,
    chunk: int = 1024,
) -> TokenLoss:
    """`token_cross_entropy(F.linear(hidden, weight, bias), targets, label_smoothing)` without the
    (N, V) logits: the same TokenLoss, its loss carrying the gradients of hidden, weight and bias."""
    if chunk < 1:
        raise ValueError(f"chunk={chunk}: expected rows per chunk >= 1")
    counted = targets != IGNORE_INDEX
    n_tokens = counted.sum()
    loss_sum, nll_sum, predictions = _FusedLinearCrossEntropy.apply(
        hidden, weight, bias, targets, label_smoothing, chunk
    )
    n_correct = ((predictions == targets) & counted).sum()
    return TokenLoss(loss_sum / n_tokens.clamp(min=1), nll_sum.detach(), n_tokens, n_correct, predictions)


class FusedCausalLM(nn.Module):
    """The causal LM objective (objectives/clm.py) with the head and the loss fused: the model's
    hidden states go to `linear_cross_entropy` with its head's projection."""

    def __init__(self, label_smoothing: float, chunk: int) -> None:
        super().__init__()
        self.label_smoothing, self.chunk = label_smoothing, chunk

    def forward(self, model: nn.Module, batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        head = model.head
        if head.transform is not None or head.scale is not None:
            raise ValueError("FusedCausalLM: the head must be a plain projection (no transform, no scale)")
        hidden = model.features(batch["input_ids"], batch.get("attention_mask"))  # (B, T, D)
        next_labels = F.pad(batch["labels"][:, 1:], (0, 1), value=IGNORE_INDEX)  # (B, T)
        result = linear_cross_entropy(
            hidden.reshape(-1, hidden.shape[-1]),
            head.proj.weight,
            head.proj.bias,
            next_labels.reshape(-1),
            self.label_smoothing,
            self.chunk,
        )
        return result.loss, result.stats()


def fused(chunk: int):
    """The stage's causal LM objective -> the same objective, its head and loss fused."""
    return lambda objective: FusedCausalLM(objective.label_smoothing, chunk)


def run(quick: bool) -> list[Row]:
    plan = plan_of(recipes()["decoder"]["default"])
    torch.manual_seed(0)
    steps = {
        "stage": training_step(plan),
        **{f"fused{c}": training_step(plan, swap=fused(c)) for c in CHUNKS},
    }
    samples = interleave(steps, rounds=3 if quick else 30, warmup=2)
    per_step = {name: median(values) for name, values in samples.items()}
    return [
        Row(
            group="linear_ce",
            name=f"decoder step, chunk {c}",
            ours=1 / per_step[f"fused{c}"],
            peer=1 / per_step["stage"],
            unit="steps/s",
            peer_name="head + token_cross_entropy (the pretrain stage)",
            extra={"seconds_per_step": {"fused": per_step[f"fused{c}"], "stage": per_step["stage"]}},
        )
        for c in CHUNKS
    ]
