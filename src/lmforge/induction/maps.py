"""Where a kept checkpoint's heads attend on repeated random tokens (issue 74: which key a copying head
reads). For checkpoints that `induction.keep_steps` kept (or any decoder checkpoint):

    python -m lmforge.induction.maps reports/induction/control/periodic_seed0/seed0/last.ckpt \\
        --lengths 63 47 40 --vocab 64

Per copy length L: the two copies' losses, and each head's distances (query - key) that hold the most
of its mean attention from the second copy's tokens. A head that matches content moves its distance
with L (an induction head on the textbook key attends L - 1 back; on a key shifted by s, L - 1 - s); a
head that attends by position keeps it. Then the shifted score's best head and shift over the lengths
(`lmforge.interpret.induction.shifted_induction_scores`). The sequences are the study's: the tokenizer's
first `vocab` non-special ids (0: all), after an EOS, the k-th length's drawn from seed k (the study's
probe draws its two lengths from seeds 0 and 1).
"""

from __future__ import annotations

import argparse
import sys

import torch
from torch import nn

from lmforge.errors import LmforgeError
from lmforge.interpret.induction import repeat_losses, repeated_sequences, shifted_induction_scores

TOP = 3  # distances listed per head


@torch.no_grad()
def attention_by_distance(model: nn.Module, sequences: torch.Tensor) -> torch.Tensor:
    """(layers, heads, T): the mean attention from the second copy's tokens to the key d = query - key
    positions back, for d = 0 .. T - 1 (each query's row over its own keys, then the mean over queries)."""
    L = (sequences.shape[1] - 1) // 2
    attentions = model(sequences, output_attentions=True).attentions  # per layer (n, H, T, T)
    T = sequences.shape[1]
    out = []
    for a in attentions:
        by = torch.zeros(a.shape[1], T)
        for q in range(L + 1, 2 * L + 1):
            by[:, : q + 1] += a[:, :, q, : q + 1].mean(0).flip(-1)  # index d = q - key
        out.append(by / L)
    return torch.stack(out)


def report(model: nn.Module, lengths: list[int], low: int, high: int, bos: int) -> str:
    probes = [repeated_sequences(64, length, low, high, bos, i) for i, length in enumerate(lengths)]
    lines = []
    for length, sequences in zip(lengths, probes, strict=True):
        losses = repeat_losses(model, sequences)
        lines.append(
            f"L={length}: copy losses {losses['first_copy_loss']:.2f} (first), {losses['second_copy_loss']:.2f} (second)"
        )
        by = attention_by_distance(model, sequences)
        for layer in range(by.shape[0]):
            for head in range(by.shape[1]):
                top = torch.topk(by[layer, head], TOP)
                where = ", ".join(
                    f"{int(d)} back ({v:.2f})" for v, d in zip(top.values, top.indices, strict=True)
                )
                lines.append(f"  layer {layer + 1} head {head + 1}: {where}")
    scores = shifted_induction_scores(model, probes)
    layer, head, shift = (int(i) for i in torch.unravel_index(scores.argmax(), scores.shape))
    lines.append(
        f"shifted score over lengths {lengths}: {scores.max():.3f}, layer {layer + 1} head {head + 1}, shift {shift}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
    from lmforge.training.checkpoints import load_module

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument(
        "--lengths", type=int, nargs="+", default=[63, 47, 40], help="copy lengths (two or more)"
    )
    parser.add_argument(
        "--vocab", type=int, default=64, help="random tokens drawn from (0: every non-special id)"
    )
    parser.add_argument("--tokenizer", default="artifacts/tokenizers/bpe/tokenizer.json")
    args = parser.parse_args(argv)
    try:
        model = load_module(args.checkpoint).model.eval()
        tokenizer = load_tokenizer(args.tokenizer)
        n_special = len(tokenizer.get_added_tokens_decoder())
        high = n_special + args.vocab if args.vocab else tokenizer.get_vocab_size()
        too_long = [n for n in args.lengths if 2 * n + 1 > model.config.max_seq_len]
        if too_long or len(set(args.lengths)) < 2:
            print(
                f"error: --lengths: got {args.lengths}, expected two or more distinct lengths with 2 * L + 1 <= "
                f"the model's max_seq_len {model.config.max_seq_len}",
                file=sys.stderr,
            )
            sys.exit(2)
        print(report(model, args.lengths, n_special, high, special_token_ids(tokenizer).eos))
    except LmforgeError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
