"""The induction probe against a head built by hand (issue 74 item 1): before a report may say that no
induction head formed, the probe must see one where one exists.

A 2-layer attention-only decoder whose weights are set by hand, in disjoint subspaces of the residual
stream (learned positions, RMSNorm so a norm only rescales, no biases):
- tokens one-hot in dims [0, V), positions one-hot in [V, V + P), and a third block [V + P, 2V + P)
  that layer 0 fills with the previous token;
- layer 0, head 0, a previous-token head: its query is position t moved to t - 1, its key the position,
  its value the token, written into the third block;
- layer 1, head 0, an induction head: its query is the current token, its key the previous-token block
  (so it attends to the position just after the current token's earlier occurrence), its value the
  token there, written back onto the token block that the output layer reads;
- the second head of each layer is all zeros (uniform attention, writes nothing).

The probe (`lmforge.interpret.induction`, which the induction study and `interpret` both use) must give
that induction head a score near 1 and every other head a score near that of uniform attention, and
find the second copy far better predicted than the first; a randomly initialised model of the same
shape scores near uniform and gains nothing. The last test runs the same checks through a probe that
reads the wrong offset (the earlier occurrence itself rather than the token after it) and shows they
fail there: the test can tell a right probe from a wrong one.
"""

from __future__ import annotations

import pytest
import torch

from lmforge.interpret.induction import induction_scores, repeat_losses, repeated_sequences
from lmforge.model import build_model
from lmforge.model.config import ModelConfig

V, P, L = 16, 20, 8  # vocabulary, position table, length of each copy (sequences are 2L + 1 long)
HEAD = 32  # head_dim: two heads in a 64-wide stream


def config() -> ModelConfig:
    return ModelConfig(
        vocab_size=V, d_model=64, n_layers=2, n_heads=2, mlp=False, position="learned", norm="rms",
        bias=False, tie_embeddings=False, max_seq_len=P,
    )  # fmt: skip


def constructed() -> torch.nn.Module:
    """The model of the docstring: a previous-token head (0, 0) feeding an induction head (1, 0)."""
    torch.manual_seed(0)
    model = build_model(config()).eval()
    T, POS, PREV = 0, V, V + P  # where each block starts in the residual stream
    sharp, copy = 6.0, 4.0  # attention logits of ~30 on the intended key; the copied token's weight
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
        model.embeddings.tok.weight[:, T : T + V] = torch.eye(V)
        model.embeddings.pos.weight[:, POS : POS + P] = torch.eye(P)
        first, second = model.stack.layers
        a = first.attn  # head 0 uses rows [0, HEAD) of q/k/v and columns [0, HEAD) of out_proj
        for t in range(1, P):
            a.q_proj.weight[t - 1, POS + t] = sharp  # position t asks for position t - 1 ...
        for t in range(P):
            a.k_proj.weight[t, POS + t] = 1.0  # ... which each key announces
        a.v_proj.weight[:V, T : T + V] = torch.eye(V)  # the token there
        a.out_proj.weight[PREV : PREV + V, :V] = torch.eye(V) / 5.66  # -> the previous-token block, ~1
        b = second.attn
        b.q_proj.weight[:V, T : T + V] = sharp * torch.eye(V)  # the current token ...
        b.k_proj.weight[:V, PREV : PREV + V] = torch.eye(V)  # ... against each position's previous token
        b.v_proj.weight[:V, T : T + V] = torch.eye(V)  # the token that followed it
        b.out_proj.weight[T : T + V, :V] = copy * torch.eye(V)  # onto the token block
        model.head.proj.weight[:, T : T + V] = 4.0 * torch.eye(V)  # logits read the token block
    return model


def sequences(n: int = 64) -> torch.Tensor:
    """[BOS, r_1..r_L, r_1..r_L] as `repeated_sequences` lays them out, each copy drawn without
    repeats: where a token occurs twice in a copy, a perfect induction head splits its attention
    between the tokens after each occurrence, and the score would measure the draw, not the probe."""
    g = torch.Generator().manual_seed(3)
    half = torch.stack([torch.randperm(V - 1, generator=g)[:L] + 1 for _ in range(n)])
    return torch.cat([torch.zeros(n, 1, dtype=torch.long), half, half], dim=1)


def test_the_sequences_are_laid_out_as_the_probe_s_own():
    ours, probe_s = sequences(4), repeated_sequences(4, L, low=1, high=V, bos=0, seed=3)
    assert ours.shape == probe_s.shape and (ours[:, 0] == probe_s[:, 0]).all()
    assert (ours[:, 1 : L + 1] == ours[:, L + 1 :]).all()


def uniform_score() -> float:
    """The score of a head attending evenly to every key it sees (query L + i sees L + i + 1 keys)."""
    return sum(1 / (L + i + 1) for i in range(1, L + 1)) / L


def test_the_probe_finds_the_induction_head_built_by_hand_and_no_other():
    scores = induction_scores(constructed(), sequences())
    assert scores.shape == (2, 2)
    assert scores[1, 0] > 0.95, scores  # the induction head
    others = scores.flatten()[[0, 1, 3]]
    assert (others < uniform_score() + 0.05).all(), scores  # the previous-token head and the idle heads


def test_the_constructed_head_predicts_the_second_copy_and_the_probe_says_so():
    losses = repeat_losses(constructed(), sequences())
    assert losses["second_copy_loss"] < 0.3, losses
    assert losses["repeat_gain"] > 1.5, losses  # nats: the first copy is near log(V - 1) ~ 2.7


def test_a_random_model_scores_near_uniform_and_gains_nothing():
    torch.manual_seed(0)
    model = build_model(config()).eval()
    scores = induction_scores(model, sequences())
    assert (scores < uniform_score() + 0.05).all(), scores
    assert abs(repeat_losses(model, sequences())["repeat_gain"]) < 0.1


def wrong_offset_scores(model: torch.nn.Module, seqs: torch.Tensor) -> torch.Tensor:
    """The probe's computation with the key one position early: the earlier occurrence itself."""
    attentions = model(seqs, output_attentions=True).attentions
    queries = torch.arange(L + 1, 2 * L + 1)
    keys = queries - L  # the mistake: not the token after the earlier occurrence
    return torch.stack([a[:, :, queries, keys].mean(dim=(0, 2)) for a in attentions])


def test_the_check_fails_on_a_probe_that_reads_the_wrong_offset():
    with torch.no_grad():
        scores = wrong_offset_scores(constructed(), sequences())
    with pytest.raises(AssertionError):
        assert scores[1, 0] > 0.95  # the first test's check, on the wrong probe
