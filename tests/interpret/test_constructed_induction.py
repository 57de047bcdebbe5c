"""The induction probe against a head built by hand (issue 74 item 1): before a report may say that no
induction head formed, the probe must see one where one exists.

A 2-layer attention-only decoder whose weights are set by hand, in disjoint subspaces of the residual
stream (learned positions, RMSNorm so a norm only rescales, no biases):
- tokens one-hot in dims [0, V), positions one-hot in [V, V + P), a third block [V + P, 2V + P) that
  layer 0 fills with the previous token, and a fourth [2V + P, 3V + P) used only with a shift;
- layer 0, head 0, a previous-token head: its query is position t moved to t - 1, its key the position,
  its value the token, written into the third block;
- layer 1, head 0, an induction head: its query is the current token, its key the previous-token block
  (so it attends to the position just after the current token's earlier occurrence), its value the
  token there, written back onto the token block that the output layer reads;
- the other heads are all zeros (uniform attention, writes nothing).
With a shift s (`constructed(shift=s)`), head (0, 0) moves the token from s + 1 back and head (0, 1) the
token from s back into the fourth block, which the induction head reads: it copies as well, through
the key s positions after the textbook one. The 128-wide control of the induction study copies so
(docs/findings.md), which the textbook score misses and `shifted_induction_scores` finds.

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

from lmforge.induction.maps import attention_by_distance, report
from lmforge.interpret.induction import (
    induction_scores,
    repeat_losses,
    repeated_sequences,
    shifted_induction_scores,
)
from lmforge.model import build_model
from lmforge.model.config import ModelConfig

V, P, L = 16, 20, 8  # vocabulary, position table, length of each copy (sequences are 2L + 1 long)
D, HEAD = 96, 48  # the residual stream: two heads of 48; room for the four blocks of the docstring


def config() -> ModelConfig:
    return ModelConfig(
        vocab_size=V, d_model=D, n_layers=2, n_heads=2, mlp=False, position="learned", norm="rms",
        bias=False, tie_embeddings=False, max_seq_len=P,
    )  # fmt: skip


def constructed(shift: int = 0) -> torch.nn.Module:
    """The model of the docstring: a previous-token head (0, 0) feeding an induction head (1, 0). With
    `shift` s > 0, head (0, 0) moves the token from s + 1 back and head (0, 1) the token from s back,
    so the induction head matches the key s positions after the token that followed the earlier
    occurrence and reads there the token to copy: the same prediction through a shifted key."""
    torch.manual_seed(0)
    model = build_model(config()).eval()
    T, POS, PREV, NEXT = 0, V, V + P, 2 * V + P  # where each block starts in the residual stream
    sharp, copy = 6.0, 4.0  # attention logits of ~30 on the intended key; the copied token's weight
    unit = (D / 2) ** 0.5  # RMSNorm of a token + position embedding: each one-hot entry becomes this
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
        model.embeddings.tok.weight[:, T : T + V] = torch.eye(V)
        model.embeddings.pos.weight[:, POS : POS + P] = torch.eye(P)
        first, second = model.stack.layers
        a = first.attn  # head h uses rows [h * HEAD, (h + 1) * HEAD) of q/k/v and those columns of out_proj
        for head, back, block in ((0, shift + 1, PREV), (1, shift, NEXT)):
            if head == 1 and shift == 0:
                break  # the token to copy is the key's own: no second head
            rows = head * HEAD
            for t in range(back, P):
                a.q_proj.weight[rows + t - back, POS + t] = sharp  # position t asks for t - back ...
            for t in range(P):
                a.k_proj.weight[rows + t, POS + t] = 1.0  # ... which each key announces
            a.v_proj.weight[rows : rows + V, T : T + V] = torch.eye(V)  # the token there
            a.out_proj.weight[block : block + V, rows : rows + V] = torch.eye(V) / unit  # -> its block, ~1
        b = second.attn
        b.q_proj.weight[:V, T : T + V] = sharp * torch.eye(V)  # the current token ...
        b.k_proj.weight[:V, PREV : PREV + V] = torch.eye(V)  # ... against each position's moved token
        read = T if shift == 0 else NEXT
        b.v_proj.weight[:V, read : read + V] = torch.eye(V)  # the token that followed it
        b.out_proj.weight[T : T + V, :V] = copy * torch.eye(V)  # onto the token block
        model.head.proj.weight[:, T : T + V] = 4.0 * torch.eye(V)  # logits read the token block
    return model


def sequences(n: int = 64, length: int = L) -> torch.Tensor:
    """[BOS, r_1..r_L, r_1..r_L] as `repeated_sequences` lays them out, each copy drawn without
    repeats: where a token occurs twice in a copy, a perfect induction head splits its attention
    between the tokens after each occurrence, and the score would measure the draw, not the probe."""
    g = torch.Generator().manual_seed(3)
    half = torch.stack([torch.randperm(V - 1, generator=g)[:length] + 1 for _ in range(n)])
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


SHORT = 6  # the second copy length of the shifted score's probes


def probes() -> list[torch.Tensor]:
    return [sequences(64, L), sequences(64, SHORT)]


def test_the_shifted_score_finds_the_textbook_head_at_shift_zero_and_no_other_head():
    scores = shifted_induction_scores(constructed(), probes())
    assert scores.shape == (2, 2, SHORT)  # shifts 0 .. SHORT - 1: the last one's key is the query
    assert scores[1, 0, 0] > 0.95, scores[1, 0]
    rest = torch.cat([scores[1, 0, 1:], scores[0].flatten(), scores[1, 1]])
    assert (rest < uniform_score() + 0.05).all(), scores


def test_a_head_on_a_shifted_key_is_missed_by_the_textbook_score_and_found_at_its_shift():
    model = constructed(shift=3)
    for length in (L, SHORT):  # it copies: the second copy is predicted from the first
        assert repeat_losses(model, sequences(64, length))["second_copy_loss"] < 0.3
    assert induction_scores(model, sequences())[1, 0] < uniform_score() + 0.05  # the textbook key misses it
    scores = shifted_induction_scores(model, probes())
    assert scores[1, 0].argmax() == 3 and scores[1, 0, 3] > 0.95, scores[1, 0]
    assert (scores[0] < uniform_score() + 0.05).all() and (scores[1, 1] < uniform_score() + 0.05).all(), (
        scores
    )


def test_a_head_at_a_fixed_distance_scores_at_one_length_only_and_is_dropped():
    """Head (0, 0) of the shifted model attends 4 back whatever the tokens: at copy length 8 that is
    shift 3's key, so one length alone would score it as the induction head; the second length does not."""
    model = constructed(shift=3)
    with torch.no_grad():
        attention = model(sequences(), output_attentions=True).attentions[0][:, 0]
    queries = torch.arange(L + 1, 2 * L + 1)
    assert attention[:, queries, queries - L + 1 + 3].mean() > 0.95  # at one length: a perfect score
    assert shifted_induction_scores(model, probes())[0, 0].max() < uniform_score() + 0.05


def test_the_shifted_score_of_a_random_model_is_near_uniform_and_one_length_is_refused():
    torch.manual_seed(0)
    model = build_model(config()).eval()
    assert (shifted_induction_scores(model, probes()) < uniform_score() + 0.05).all()
    with pytest.raises(ValueError, match="expected two or more distinct"):
        shifted_induction_scores(model, [sequences(), sequences()])


def test_the_maps_tool_reads_the_shifted_head_s_distance_moving_with_the_length():
    """`lmforge.induction.maps`: head (0, 0) of the shifted model stays 4 back at both lengths (position);
    the induction head moves with the copy length, L - 1 - 3 back (content), and the report says so."""
    model = constructed(shift=3)
    for length in (L, SHORT):
        by = attention_by_distance(model, sequences(64, length))
        assert by.shape == (2, 2, 2 * length + 1)
        assert int(by[0, 0].argmax()) == 4 and int(by[1, 0].argmax()) == length - 1 - 3
    text = report(model, [L, SHORT], low=1, high=V, bos=0)
    assert "shifted score over lengths [8, 6]:" in text and "layer 2 head 1, shift 3" in text


def test_the_largest_shift_a_probe_can_show_is_scored_its_key_being_the_query_itself():
    """Shift SHORT - 1: at the shorter copy length the key is the query, whose token from SHORT back is
    the earlier occurrence (the 128-wide control's seed 2 copies so, through heads 46 and 47 back)."""
    model = constructed(shift=SHORT - 1)
    assert repeat_losses(model, sequences(64, SHORT))["second_copy_loss"] < 0.3
    scores = shifted_induction_scores(model, probes())
    assert scores[1, 0].argmax() == SHORT - 1 and scores[1, 0, SHORT - 1] > 0.95, scores[1, 0]
