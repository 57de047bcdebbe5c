"""Parallel pairs: the local TSV reader and its refusals, the book split, token-count batches, the
collator's shift, long pairs, the dictionary baseline, checkpoint averaging, sacreBLEU and the loss."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from helpers import tiny
from lmforge.errors import DataError
from lmforge.objectives.masking import IGNORE_INDEX
from lmforge.objectives.seq2seq import Seq2SeqObjective
from lmforge.training.config import ObjectiveConfig, ObjectiveKind, OptimConfig
from lmforge.training.module import PretrainModule
from lmforge.translate.batches import Encoded, PairCollator, TokenBatches, encode_pairs, token_batches
from lmforge.translate.config import (
    LocalPairs,
    LongPairs,
    PairsConfig,
    PairsSource,
    TranslateConfig,
    pairs_config,
)
from lmforge.translate.evaluate import Dictionary, score
from lmforge.translate.pairs import Pair, prepare, read_sword
from lmforge.translate.train import LastWeights, noam_peak, schedule


def _local(tmp_path: Path, text: str, **kwargs) -> PairsConfig:
    path = tmp_path / "pairs.tsv"
    path.write_text(text, encoding="utf-8")
    return PairsConfig(source=PairsSource.local, local=LocalPairs(str(path)), **kwargs)


def test_local_tsv_is_split_by_group_with_duplicates_and_leaks_dropped(tmp_path):
    lines = [f"the house {i}\tla casa {i}\tg{i % 5}" for i in range(50)]
    lines += ["the house 3\tla casa 3\tg3"]  # an exact duplicate pair
    lines += ["the house 1\tla casa uno\tg4"]  # a training source that is also a test source (g1)
    cfg = _local(tmp_path, "\n".join(lines) + "\n", val_groups=["g0"], test_groups=["g1"])
    splits, numbers, card = prepare(cfg)
    assert {p.group for p in splits["test"]} == {"g1"} and {p.group for p in splits["val"]} == {"g0"}
    assert {p.group for p in splits["train"]} == {"g2", "g3", "g4"}
    assert numbers["duplicates_dropped"] == 1 and numbers["train_dropped_held_out_source"] == 1
    assert numbers["train_pairs"] == 30 and numbers["test_pairs"] == 10
    assert "never seen in training" in card


def test_local_tsv_without_groups_is_split_by_a_seeded_share(tmp_path):
    text = "".join(f"s{i}\tt{i}\n" for i in range(200))
    splits, _, _ = prepare(_local(tmp_path, text, val_fraction=0.1, test_fraction=0.1))
    assert [len(splits[s]) for s in ("train", "val", "test")] == [160, 20, 20]
    again, _, _ = prepare(_local(tmp_path, text, val_fraction=0.1, test_fraction=0.1))
    assert again == splits


@pytest.mark.parametrize(
    "text, match",
    [
        ("one\ttwo\nthree\n", r"pairs.tsv:2: got 1 tab-separated columns, expected 2 .*misaligned"),
        ("a\tb\tc\td\n", "got 4 tab-separated columns"),
        ("one\t \n", r"pairs.tsv:1: empty target sentence"),
        ("\tuno\n", "empty source sentence"),
    ],
)
def test_misaligned_or_empty_pairs_are_refused_naming_the_line(tmp_path, text, match):
    with pytest.raises(DataError, match=match):
        prepare(_local(tmp_path, text))


def test_a_missing_debian_client_names_the_local_alternative(monkeypatch, tmp_path):
    from lmforge.corpora import fetch

    def no_apt(pin, cache):
        raise DataError(f"apt-get not found on PATH; it is needed to run: apt-get download {pin.package}")

    monkeypatch.setattr(fetch, "apt_deb", no_apt)
    monkeypatch.setattr("lmforge.corpora.bible.apt_deb", no_apt)
    module = {"pin": {"package": "sword-text-web", "version": "1", "sha256": "0" * 64}, "module": "x"}
    cfg = pairs_config({"first": module, "second": module})
    with pytest.raises(
        DataError, match=r"apt-get not found.*pairs=local pairs.local.path=<file.tsv>"
    ) as info:
        read_sword(cfg, tmp_path)
    assert "\n" not in str(info.value)


def test_unknown_held_out_groups_and_overlaps_are_refused(tmp_path):
    with pytest.raises(DataError, match=r"pairs.test_groups: \['Tobit'\] not found"):
        prepare(_local(tmp_path, "a\tb\tg1\nc\td\tg2\n", test_groups=["Tobit"]))
    with pytest.raises(Exception, match="share"):
        PairsConfig(
            source=PairsSource.local, local=LocalPairs("p.tsv"), val_groups=["Ruth"], test_groups=["Ruth"]
        )


def test_token_batches_stay_within_max_tokens_and_cover_every_pair_once():
    g = torch.Generator().manual_seed(0)
    sources = torch.randint(4, 40, (300,), generator=g)
    lengths = [(int(a), int(a) + int(d)) for a, d in zip(sources, torch.randint(-2, 3, (300,), generator=g))]
    pairs = [Encoded([5] * s, [6] * t) for s, t in lengths]
    sampler = TokenBatches(pairs, max_tokens=400, seed=3)
    first, second = list(sampler), list(sampler)
    for epoch in (first, second):
        assert sorted(i for batch in epoch for i in batch) == list(range(300))
        for batch in epoch:
            assert len(batch) * (max(lengths[i][0] for i in batch) + max(lengths[i][1] for i in batch)) <= 400
    assert first != second  # a new shuffle each epoch ...
    assert list(TokenBatches(pairs, max_tokens=400, seed=3)) == first  # ... reproducible from the seed
    padded = sum(len(b) * (max(lengths[i][0] for i in b) + max(lengths[i][1] for i in b)) for b in first)
    assert padded < 1.25 * sum(s + t for s, t in lengths)  # length buckets keep padding small
    assert token_batches([(3, 3), (3, 3), (3, 3)], 12, [0, 1, 2]) == [[0, 1], [2]]


@pytest.mark.parametrize("shuffle", [True, False])
def test_len_is_the_number_of_batches_of_the_epoch_being_iterated(shuffle):
    # Many pairs share their lengths, so each epoch's draw reorders them: the count must not move.
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(3, 12, (200, 2), generator=g).tolist()
    sampler = TokenBatches(
        [Encoded([5] * s, [6] * t) for s, t in lengths], max_tokens=90, seed=7, shuffle=shuffle
    )
    epochs = []
    for _ in range(4):  # Lightning asks len() before an epoch starts and again once it has started
        before = len(sampler)
        batches = iter(sampler)
        assert len(sampler) == before
        epochs.append(list(batches))
        assert len(epochs[-1]) == before
    assert shuffle == (epochs[0] != epochs[1])  # the epochs do differ (when shuffled)


def test_a_pair_longer_than_max_tokens_is_refused():
    with pytest.raises(DataError, match="translate.max_tokens: got 10, expected at least 12"):
        TokenBatches([Encoded([1] * 6, [1] * 6)], max_tokens=10, seed=0)


def test_collator_shifts_the_target_right_behind_the_start_token():
    batch = PairCollator([Encoded([7, 8, 1], [4, 5, 6, 1]), Encoded([9, 1], [3, 1])], pad=0, bos=1)([0, 1])
    assert batch["input_ids"].tolist() == [[7, 8, 1], [9, 1, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["decoder_input_ids"].tolist() == [[1, 4, 5, 6], [1, 3, 0, 0]]
    assert batch["labels"].tolist() == [[4, 5, 6, 1], [3, 1, IGNORE_INDEX, IGNORE_INDEX]]
    assert batch["decoder_attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]


class _Tok:
    """Whitespace 'tokenizer': one id per word (its length)."""

    class _E:
        def __init__(self, ids):
            self.ids = ids

    def encode_batch(self, texts, add_special_tokens=False):
        return [self._E([len(w) + 2 for w in t.split()]) for t in texts]


def test_long_pairs_are_truncated_and_counted_or_refused():
    pairs = [Pair("a", "", "one two three four", "uno"), Pair("b", "", "one", "uno")]
    out = encode_pairs(_Tok(), pairs, eos=1, max_len=3, long_pairs=LongPairs.truncate, split="train")
    assert out.truncated == 1 and out.pairs[0].source == [5, 5, 1] and out.pairs[1].source == [5, 1]
    with pytest.raises(
        DataError,
        match=r"train pair a: 5 source and 2 target tokens with EOS, expected at most model.max_seq_len=3",
    ):
        encode_pairs(_Tok(), pairs, eos=1, max_len=3, long_pairs=LongPairs.refuse, split="train")


def test_translation_loss_is_label_smoothed_cross_entropy_by_hand():
    # One target position, V = 3, logits (0, ln 2, 0): p = (1/4, 1/2, 1/4), target 1, eps = 0.1.
    # Smoothed loss = (1 - eps) * -ln p_1 + eps * mean_c(-ln p_c) = 0.9 ln 2 + 0.1 * (ln 4 + ln 2 + ln 4) / 3.
    logits = torch.tensor([[[0.0, math.log(2.0), 0.0], [9.0, 9.0, 9.0]]])

    class Fixed(torch.nn.Module):
        def forward(self, *args, **kwargs):
            return type("Out", (), {"logits": logits})

    batch = {
        "input_ids": torch.tensor([[5]]),
        "decoder_input_ids": torch.tensor([[1, 0]]),
        "labels": torch.tensor([[1, IGNORE_INDEX]]),  # the padded position counts for nothing
    }
    loss, stats = Seq2SeqObjective(label_smoothing=0.1)(Fixed(), batch)
    by_hand = 0.9 * math.log(2) + 0.1 * (math.log(4) + math.log(2) + math.log(4)) / 3
    assert loss.item() == pytest.approx(by_hand, rel=1e-6)
    assert stats["nll_sum"].item() == pytest.approx(math.log(2), rel=1e-6)  # perplexity stays unsmoothed
    assert F.cross_entropy(logits[0, :1], torch.tensor([1]), label_smoothing=0.1).item() == pytest.approx(
        by_hand
    )


def test_the_seq2seq_kind_trains_translation_as_span_corruption_did():
    # translate_train used objective kind span_corruption; its own kind must give the same loss, stats
    # and gradients on the same batch, so the committed translation metrics stay where they are.
    pairs = [Encoded([7, 8, 9, 1], [4, 5, 6, 1]), Encoded([9, 1], [3, 12, 1]), Encoded([10, 11, 1], [2, 1])]
    batch = PairCollator(pairs, pad=0, bos=1)([0, 1, 2])
    model = tiny(family="encoder_decoder", n_encoder_layers=2, vocab_size=20, dropout=0.0)
    optim = OptimConfig(name="noam", lr=1.0, schedule="noam", warmup_steps=4)
    results = []
    for kind in ("span_corruption", "seq2seq"):
        torch.manual_seed(0)
        objective = ObjectiveConfig(name="translation", kind=ObjectiveKind(kind), label_smoothing=0.1)
        module = PretrainModule(model, objective, optim, max_steps=10)
        loss, stats = module(batch)
        loss.backward()
        results.append((loss, stats, [p.grad for p in module.parameters()]))
    (old_loss, old_stats, old_grads), (loss, stats, grads) = results
    assert torch.equal(loss, old_loss) and loss.item() > 0
    assert stats.keys() == old_stats.keys() and all(torch.equal(stats[k], old_stats[k]) for k in stats)
    assert all(torch.equal(g, old) for g, old in zip(grads, old_grads, strict=True))


def test_no_warmup_is_a_constant_rate_at_the_noam_peak():
    optim = OptimConfig(name="noam", lr=2.0, schedule="noam", warmup_steps=400, betas=[0.9, 0.98], eps=1e-9)
    assert noam_peak(optim, 128) == pytest.approx(2.0 * 128**-0.5 * 400**-0.5)
    assert schedule(optim, TranslateConfig(warmup=True), 128) == optim
    flat = schedule(optim, TranslateConfig(warmup=False), 128)
    assert (flat.schedule, flat.warmup_steps, flat.lr) == (
        "constant",
        0,
        pytest.approx(noam_peak(optim, 128)),
    )
    from lmforge.training.schedules import make_schedule

    noam = make_schedule("noam", 400, d_model=128)
    assert max(optim.lr * noam(i) for i in range(2000)) == pytest.approx(flat.lr)  # the same peak
    assert optim.lr * noam(399) == pytest.approx(flat.lr)  # reached at step warmup


def test_checkpoint_averaging_is_the_mean_of_the_last_k_snapshots():
    keeper = LastWeights(k=2, every=1)
    for step, value in enumerate([1.0, 2.0, 4.0], start=1):
        keeper.snapshots.append((step, {"w": torch.tensor([value]), "n": torch.tensor(step)}))
    state, steps = keeper.averaged()
    assert steps == [2, 3] and state["w"].item() == 3.0 and state["n"].item() == 3  # integers: the last


def test_dictionary_baseline_learns_word_translations_by_co_occurrence():
    train = [
        Pair("1", "", "the house", "la casa"),
        Pair("2", "", "the dog", "el perro"),
        Pair("3", "", "a house", "una casa"),
        Pair("4", "", "a dog", "un perro"),
    ]
    translate = Dictionary(train)
    assert translate("house, dog!") == "casa, perro!"
    assert translate("unknown words") == "unknown words"  # never seen: copied


def test_sacrebleu_is_called_as_documented():
    import sacrebleu

    hyps = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]
    refs = ["The dog bit the man.", "It was not unexpected.", "The man bit him first."]
    out = score(hyps, refs)
    assert out["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert out["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    assert "tok:13a" in out["bleu_signature"] and "nrefs:1" in out["bleu_signature"]
    assert score(refs, refs)["bleu"] == pytest.approx(100.0)
