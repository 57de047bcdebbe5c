"""Induction heads and in-context learning (Olsson et al. 2022).

- Repeated random tokens: sequences [EOS, r_1..r_L, r_1..r_L] of uniformly drawn non-special
  tokens. Nothing predicts the first copy; a model with induction heads predicts the second by
  finding the earlier occurrence of the current token and copying the token that followed it.
  `repeat_losses` gives the mean next-token loss on each copy (targets r_2..r_L of each).
- The induction score of a head: its mean attention, from each token of the second copy, to the
  token just after that token's occurrence in the first copy (key position query - L + 1).
- The shifted induction score (`shifted_induction_scores`): the same at key query - L + 1 + s for
  each shift s >= 0, the lowest over probes of two or more copy lengths. A head matches a key s
  positions on when an earlier head moved the token there from s + 1 back (rather than from 1 back,
  a previous-token head), and reads the token to copy that a head moving it from s back put there;
  such a head follows the earlier occurrence from one length to the other, while a head that
  attends a fixed distance back scores at one length only, so the lowest of the lengths drops it.
- The in-context-learning score: mean loss at a late position of real text minus the loss at an
  early one (more context helps: negative). Olsson et al. read tokens 500 and 50 of 512-token
  contexts; the config scales the pair to the model's training length.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn


def repeated_sequences(n: int, length: int, low: int, high: int, bos: int, seed: int) -> torch.Tensor:
    """(n, 2 * length + 1): a BOS/EOS token, then `length` tokens drawn from [low, high), twice."""
    if not 0 <= low < high:
        raise ValueError(f"repeated_sequences: got token range [{low}, {high}), expected a non-empty range")
    g = torch.Generator().manual_seed(seed)
    half = torch.randint(low, high, (n, length), generator=g)
    return torch.cat([torch.full((n, 1), bos), half, half], dim=1)


@torch.no_grad()
def repeat_losses(model: nn.Module, sequences: torch.Tensor) -> dict[str, float]:
    """Mean next-token loss on the first copy's targets r_2..r_L and the second copy's r_2..r_L."""
    L = (sequences.shape[1] - 1) // 2
    logits = model(sequences).logits[:, :-1]
    nll = F.cross_entropy(logits.transpose(1, 2), sequences[:, 1:], reduction="none")  # (n, 2L)
    # target index t (predicting token t + 1): the first copy's r_2..r_L are t = 1..L-1,
    # the second copy's r_2..r_L are t = L+1..2L-1
    first, second = nll[:, 1:L].mean().item(), nll[:, L + 1 : 2 * L].mean().item()
    return {"first_copy_loss": first, "second_copy_loss": second, "repeat_gain": first - second}


@torch.no_grad()
def induction_scores(model: nn.Module, sequences: torch.Tensor) -> torch.Tensor:
    """(layers, heads): mean attention from second-copy tokens to the token after their first occurrence."""
    L = (sequences.shape[1] - 1) // 2
    attentions = model(sequences, output_attentions=True).attentions  # per layer (n, H, T, T)
    queries = torch.arange(L + 1, 2 * L + 1)  # the second copy's tokens r_1..r_L
    keys = queries - L + 1  # the first copy's token after each one's earlier occurrence
    return torch.stack([a[:, :, queries, keys].mean(dim=(0, 2)) for a in attentions])


@torch.no_grad()
def shifted_induction_scores(model: nn.Module, probes: Sequence[torch.Tensor]) -> torch.Tensor:
    """(layers, heads, shifts): for shift s = 0 .. (the shortest copy length - 1), the mean attention
    from second-copy tokens to key query - L + 1 + s, the lowest over `probes` (repeated sequences of
    distinct copy lengths L; s = 0 is `induction_scores` at the lowest of the lengths). The last shift's
    key is the query itself, where an earlier head moving tokens from L back has put the current token's
    earlier occurrence: the largest lag a probe of length L can show."""
    lengths = [(p.shape[1] - 1) // 2 for p in probes]
    if len(set(lengths)) < 2:
        raise ValueError(
            f"shifted_induction_scores: got copy lengths {lengths}, expected two or more distinct"
        )
    shifts = torch.arange(min(lengths))
    per_probe = []
    for sequences, L in zip(probes, lengths, strict=True):
        attentions = model(sequences, output_attentions=True).attentions  # per layer (n, H, T, T)
        queries = torch.arange(L + 1, 2 * L + 1).expand(len(shifts), L)  # (shifts, L)
        keys = queries - L + 1 + shifts[:, None]
        per_probe.append(torch.stack([a[:, :, queries, keys].mean(dim=(0, 3)) for a in attentions]))
    return torch.stack(per_probe).amin(dim=0)


@torch.no_grad()
def token_losses(model: nn.Module, windows: Iterable[torch.Tensor]) -> torch.Tensor:
    """(N, T - 1): each window's next-token loss (nats) at each position (position t predicts t + 1);
    its mean over windows is the loss by position."""
    rows = [
        F.cross_entropy(model(ids).logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
        for ids in windows
    ]
    if not rows:
        raise ValueError("token_losses: got no windows, expected at least one")
    return torch.cat(rows)


def icl_score(by_position: torch.Tensor, early: int, late: int, band: int = 0) -> float:
    """Mean loss over positions late +- band minus the mean over early +- band (negative: context helps)."""
    if late + band >= by_position.numel() or early - band < 0:
        raise ValueError(
            f"icl_score: got positions {early} and {late} +- {band}, expected them within the window's "
            f"{by_position.numel()} predictions"
        )

    def around(p: int) -> torch.Tensor:
        return by_position[p - band : p + band + 1].mean()

    return (around(late) - around(early)).item()


def icl_by_window(losses: torch.Tensor, early: int, late: int, band: int = 0) -> torch.Tensor:
    """(N,): each window's ICL score (`icl_score` of its own losses), for an interval over windows."""
    if late + band >= losses.shape[1] or early - band < 0:
        raise ValueError(
            f"icl_by_window: got positions {early} and {late} +- {band}, expected them within the window's "
            f"{losses.shape[1]} predictions"
        )
    late_mean = losses[:, late - band : late + band + 1].mean(1)
    return late_mean - losses[:, early - band : early + band + 1].mean(1)
