"""The objective registry: one spec per kind, and the unigram baseline over each spec's targets."""

from __future__ import annotations

import math

import pytest
import torch

from lmforge.errors import ConfigError
from lmforge.evaluation.baseline import UnigramBaseline
from lmforge.model.config import Family
from lmforge.training.config import ObjectiveConfig, ObjectiveKind
from lmforge.training.objectives import OBJECTIVES, raw_length_for

IGNORE = -100


def test_every_objective_kind_has_exactly_one_spec_with_its_family():
    assert set(OBJECTIVES) == set(ObjectiveKind)
    families = {kind: spec.family for kind, spec in OBJECTIVES.items()}
    assert families == {
        ObjectiveKind.clm: Family.decoder,
        ObjectiveKind.mlm: Family.encoder,
        ObjectiveKind.span_corruption: Family.encoder_decoder,
        ObjectiveKind.seq2seq: Family.encoder_decoder,
    }
    assert [k for k, spec in OBJECTIVES.items() if spec.generates] == [ObjectiveKind.clm]


def test_targets_are_what_each_objective_predicts():
    batch = {"labels": torch.tensor([[5, 6, IGNORE, 7], [IGNORE, 8, 9, IGNORE]])}
    assert OBJECTIVES[ObjectiveKind.clm].targets(batch).tolist() == [6, 7, 8, 9]  # token t+1 from t
    assert OBJECTIVES[ObjectiveKind.mlm].targets(batch).tolist() == [5, 6, 7, 8, 9]
    assert OBJECTIVES[ObjectiveKind.seq2seq].targets(batch).tolist() == [5, 6, 7, 8, 9]


def test_seq2seq_asks_for_pairs_not_a_corpus():
    spec, objective = OBJECTIVES[ObjectiveKind.seq2seq], ObjectiveConfig(kind=ObjectiveKind.seq2seq)
    with pytest.raises(ConfigError, match="objective.kind: got seq2seq, which trains on parallel pairs"):
        spec.collator(objective, None, 100, 0)
    with pytest.raises(ConfigError, match="objective.kind: got seq2seq"):
        spec.examples(None, objective, None, 64, 0)


def test_unigram_baseline_equals_add_one_smoothed_counts():
    targets = OBJECTIVES[ObjectiveKind.mlm].targets
    train = [{"labels": torch.tensor([[1, 1, 1, 2, IGNORE]])}]
    test = [{"labels": torch.tensor([[1, 2, 3]])}]
    scores = UnigramBaseline(vocab_size=4).fit(train, targets).score(test, targets)
    counts = [1, 4, 2, 1]  # one for each id, plus the training targets
    p = [c / sum(counts) for c in counts]
    want = -(math.log(p[1]) + math.log(p[2]) + math.log(p[3])) / 3
    assert math.isclose(scores["loss"], want, rel_tol=1e-12)
    assert scores["accuracy"] == 1 / 3 and scores["n_tokens"] == 3  # always predicts id 1


def test_span_corruption_blocks_fit_the_sequence_length_after_corruption():
    from lmforge.objectives import noise_span_counts

    for seq_len in (16, 64, 128):
        raw = raw_length_for(seq_len, 0.15, 3.0)
        n_noise, n_spans = noise_span_counts(raw, 0.15, 3.0)
        assert raw - n_noise + n_spans + 1 <= seq_len  # kept tokens + sentinels + EOS fit
        n_noise, n_spans = noise_span_counts(raw + 1, 0.15, 3.0)
        assert raw + 1 - n_noise + n_spans + 1 > seq_len  # and one more raw token would not


def test_evaluation_masks_at_the_fixed_rate_whatever_rate_training_uses(in_workspace):
    """Training at 40% (Wettig et al. 2023) selects ~40% of the maskable tokens; validation and test
    select 15% (objective.eval_mlm_probability), the very masks a run trained at 15% is scored on."""
    from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
    from lmforge.training.config import TrainConfig
    from lmforge.training.datamodule import PretrainDataModule

    tokenizer = load_tokenizer("artifacts/tokenizers/wordpiece")
    specials = special_token_ids(tokenizer)
    train = TrainConfig(batch_size=8, seq_len=64)

    def batches(rate: float, split: str, shuffle: bool) -> list[dict]:
        objective = ObjectiveConfig(name="roberta", kind=ObjectiveKind.mlm, mlm_probability=rate)
        data = PretrainDataModule(
            "data/encoded/wordpiece", objective, train, specials, tokenizer.get_vocab_size()
        )
        return list(data.loader(split, shuffle=shuffle))

    def selected_share(found: list[dict]) -> float:
        labels = torch.cat([b["labels"].flatten() for b in found])
        ids = torch.cat([b["input_ids"].flatten() for b in found])
        maskable = ~torch.isin(ids, torch.tensor([0, 1, 2, 3]))  # [PAD] [UNK] [CLS] [SEP]
        return float((labels != IGNORE).sum() / maskable.sum())

    assert selected_share(batches(0.4, "train", shuffle=True)) == pytest.approx(0.4, abs=0.03)
    at_40, at_15 = batches(0.4, "val", shuffle=False), batches(0.15, "val", shuffle=False)
    assert selected_share(at_40) == pytest.approx(0.15, abs=0.03)
    assert all(torch.equal(a[k], b[k]) for a, b in zip(at_40, at_15) for k in ("input_ids", "labels"))
    with pytest.raises(ConfigError, match="eval_mlm_probability"):
        ObjectiveConfig(kind=ObjectiveKind.mlm, eval_mlm_probability=1.5)
