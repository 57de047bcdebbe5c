"""RMSNorm against LayerNorm by width: the norm alone and a whole training step, side by side.

The claim (Zhang & Sennrich 2019) is about the norm's share of a step: RMSNorm skips the mean and
the bias, so it is cheaper, and the saving shows when the norms are a visible share of the step. The
architecture experiment (`arch_eval`) times the default decoder at 64 wide, where the 8,192-entry
vocabulary head dominates; this benchmark measures the same pair at the widths where the norms
matter more:

- **op**: one norm layer's forward + backward on 16 x 128 tokens (ours: `model.components.norms`,
  which picks `F.rms_norm`; peer: `nn.LayerNorm` as `build_norm` makes it);
- **op compiled**: the same two under `torch.compile`, so both run generated kernels of the same kind
  (eager LayerNorm has a fused native CPU kernel for forward and backward; eager `rms_norm`'s
  backward is composed of elementwise ops, so eager timing compares kernels, not algorithms);
- **step**: a 4-layer pre-norm decoder of that width (4 * d_model MLP, heads of 64, vocabulary 8,192,
  batch 8 x 128) through forward, the causal-LM loss, backward and AdamW, built once with
  `norm=rms` and once with `norm=layer` from the same seed.

Ours is RMSNorm, the peer LayerNorm; the ratio is their tokens per second (above 1: RMSNorm faster).
Each pair runs interleaved in one process (`common.interleave`).

    python -m benchmarks --only norms       # writes reports/bench/norms.json (minutes on 2 cores)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from benchmarks.common import Row, interleave, median
from lmforge.model.build import build_model
from lmforge.model.components.norms import build_norm
from lmforge.model.config import Family, ModelConfig, Norm

WIDTHS = (64, 256, 512, 1024)
OP_TOKENS = 16 * 128
BATCH, SEQ, VOCAB, LAYERS = 8, 128, 8192, 4


def config(width: int, norm: str) -> ModelConfig:
    return ModelConfig(
        family=Family.decoder,
        vocab_size=VOCAB,
        d_model=width,
        n_heads=max(1, width // 64),
        n_layers=LAYERS,
        d_ff=4 * width,
        max_seq_len=SEQ,
        norm=Norm(norm),
    )


def op_step(width: int, norm: str, compiled: bool = False) -> Callable[[], None]:
    layer = build_norm(config(width, norm))
    forward = torch.compile(layer) if compiled else layer
    x = torch.randn(OP_TOKENS, width, requires_grad=True)
    grad = torch.randn(OP_TOKENS, width)

    def step() -> None:
        forward(x).backward(grad)
        x.grad = None
        layer.zero_grad(set_to_none=True)

    return step


def train_step(width: int, norm: str) -> Callable[[], None]:
    torch.manual_seed(0)
    model = build_model(config(width, norm))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, VOCAB, (BATCH, SEQ + 1), generator=g)

    def step() -> None:
        logits = model(ids[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def row(name: str, ours_s: float, peer_s: float, tokens: int, **extra: float) -> Row:
    return Row(
        group="norms",
        name=name,
        ours=tokens / ours_s,
        peer=tokens / peer_s,
        unit="tokens/s",
        peer_name="LayerNorm (same shapes, interleaved)",
        extra={"ms_rms": 1e3 * ours_s, "ms_layer": 1e3 * peer_s, **extra},
    )


def run(quick: bool = False) -> list[Row]:
    rows = []
    for width in WIDTHS:
        ops = interleave(
            {n: op_step(width, n) for n in ("rms", "layer")}, rounds=5 if quick else 30, calls=10
        )
        op = {n: median(v) for n, v in ops.items()}
        rows.append(row(f"op d{width}", op["rms"], op["layer"], OP_TOKENS))
        if width > 64:  # compiling takes ~20 s a function: the widths the claim is about
            fns = {n: op_step(width, n, compiled=True) for n in ("rms", "layer")}
            compiled = {n: median(v) for n, v in interleave(fns, rounds=5 if quick else 30, calls=10).items()}
            rows.append(row(f"op compiled d{width}", compiled["rms"], compiled["layer"], OP_TOKENS))
        steps = interleave(
            {n: train_step(width, n) for n in ("rms", "layer")}, rounds=3 if quick else 12, warmup=2
        )
        step = {n: median(v) for n, v in steps.items()}
        norms_per_step = 2 * LAYERS + 1  # two per block, pre-norm, and the final norm
        share = norms_per_step * op["layer"] * (BATCH * SEQ / OP_TOKENS) / step["layer"]
        rows.append(
            row(
                f"step d{width}",
                step["rms"],
                step["layer"],
                BATCH * SEQ,
                layernorm_share_of_step=share,  # forward + backward of the step's LayerNorms, estimated
            )
        )
    return rows
