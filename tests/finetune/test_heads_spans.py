"""Task heads and the word/token/character alignments they rely on, on a real WordPiece tokenizer
and our models: first-sub-word labels, QA spans through offsets and back, brute-force best spans,
and padding-aware pooling (a padded batch scores like each sequence alone)."""

from __future__ import annotations

import itertools

import torch

from helpers import tiny, tiny_wordpiece
from lmforge.finetune.heads import LabelWords, Pooling, SequenceHead, SpanHead, TokenHead, pool
from lmforge.finetune.spans import IGNORE_INDEX, align_word_labels, answer_token_span, best_spans, span_text
from lmforge.model import build_model


def test_word_labels_go_to_the_first_sub_word_only():
    encoding = tiny_wordpiece().encode(["The", "unhappily", "runs"], is_pretokenized=True)
    assert encoding.tokens == ["[CLS]", "the", "un", "##hap", "##pily", "runs", "[SEP]"]
    labels = align_word_labels(encoding.word_ids, [7, 8, 9])
    assert labels == [IGNORE_INDEX, 7, 8, IGNORE_INDEX, IGNORE_INDEX, 9, IGNORE_INDEX]


def test_answer_span_goes_to_tokens_and_back_to_the_same_characters():
    question, context = "Where does the tower stand?", "The old tower is in Paris."
    encoding = tiny_wordpiece().encode(question, context)
    in_context = [s == 1 for s in encoding.sequence_ids]
    start = context.index("in Paris")
    span = answer_token_span(encoding.offsets, in_context, start, start + len("in Paris"))
    assert [encoding.tokens[i] for i in range(span[0], span[1] + 1)] == ["in", "paris"]
    assert span_text(context, encoding.offsets, *span) == "in Paris"
    truncated = tiny_wordpiece()
    truncated.enable_truncation(max_length=12)  # cuts the context before "Paris"
    cut = truncated.encode(question, context)
    assert answer_token_span(cut.offsets, [s == 1 for s in cut.sequence_ids], start, start + 8) is None


def test_best_spans_equal_brute_force():
    torch.manual_seed(0)
    start, end = torch.randn(3, 9), torch.randn(3, 9)
    allowed = torch.ones(3, 9, dtype=torch.bool)
    allowed[:, :3] = False  # the question
    allowed[2, 7:] = False  # padding
    got = best_spans(start, end, allowed, max_answer_tokens=4)
    for b in range(3):
        pairs = [
            (s, e)
            for s, e in itertools.product(range(9), repeat=2)
            if allowed[b, s] and allowed[b, e] and s <= e < s + 4
        ]
        assert got[b] == max(pairs, key=lambda p: float(start[b, p[0]] + end[b, p[1]]))


def test_last_token_pooling_makes_a_decoder_classifier_padding_aware():
    torch.manual_seed(0)
    model = build_model(tiny(family="decoder")).eval()
    head = SequenceHead(32, 3, Pooling.last, dropout=0.0)
    short, long = torch.tensor([[5, 6, 7]]), torch.tensor([[8, 9, 10, 11, 12]])
    alone = [head(model(x).last_hidden_state, torch.ones_like(x, dtype=torch.bool)) for x in (short, long)]
    for left in (False, True):  # right padding (training batches) and left padding (generation)
        pad = torch.zeros(1, 2, dtype=torch.long)
        padded = torch.cat([pad, short], 1) if left else torch.cat([short, pad], 1)
        batch = torch.cat([padded, long])
        mask = batch != 0
        logits = head(model(batch, attention_mask=mask).last_hidden_state, mask)
        torch.testing.assert_close(logits, torch.cat(alone), atol=1e-5, rtol=1e-5)


def test_pooling_cls_and_mean_and_the_other_heads():
    hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).view(2, 4, 3)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.bool)
    torch.testing.assert_close(pool(hidden, mask, Pooling.cls), hidden[:, 0])
    torch.testing.assert_close(
        pool(hidden, mask, Pooling.mean), torch.stack([hidden[0, :3].mean(0), hidden[1, :2].mean(0)])
    )
    assert TokenHead(3, 5)(hidden, mask).shape == (2, 4, 5)
    start, end = SpanHead(3)(hidden, mask)
    assert torch.isinf(start[~mask]).all() and torch.isfinite(end[mask]).all()


def test_label_words_scores_each_label_by_its_teacher_forced_log_likelihood():
    torch.manual_seed(0)
    model = build_model(tiny(family="encoder_decoder", vocab_size=20)).eval()
    labels = [[7, 3], [9, 11, 3]]  # two labels of different lengths, each ending with EOS (3)
    head = LabelWords(labels, pad_id=0)
    ids = torch.tensor([[2, 5, 6, 3, 0], [2, 8, 3, 0, 0]])
    mask = ids != 0
    scores = head(model, ids, mask)
    for b in range(2):
        for i, target in enumerate(labels):
            decoder_in = torch.tensor([[0, *target[:-1]]])
            logits = model(ids[b : b + 1, : int(mask[b].sum())], None, decoder_in).logits
            expected = logits.log_softmax(-1)[0, torch.arange(len(target)), target].sum()
            assert torch.allclose(scores[b, i], expected, atol=1e-5)
