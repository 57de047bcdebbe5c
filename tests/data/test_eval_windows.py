"""Validation and test score a fixed number of evenly spaced blocks of a large split, the same blocks
every time, and a split no larger than `train.eval_windows` whole."""

from __future__ import annotations

import pytest
import torch

from lmforge.errors import ConfigError
from lmforge.tokenizer.specials import SpecialTokens
from lmforge.training.config import BlockStart, ObjectiveConfig, ObjectiveKind, TrainConfig
from lmforge.training.datamodule import PretrainDataModule

SPECIALS = SpecialTokens(pad=0, unk=None, cls=None, sep=None, mask=None, eos=1, bos=1, sentinels=())


def counting_documents(n_docs: int) -> list[list[list[int]]]:
    """Token ids 10, 11, ... along the corpus, so a block's first id tells where it was cut."""
    docs, next_id = [], 10
    for _ in range(n_docs):
        docs.append([list(range(next_id, next_id + 15))])
        next_id += 15
    return docs


def scored(make_encoded, windows: int | None) -> list[int]:
    split = make_encoded(counting_documents(60), "val")
    train = TrainConfig(batch_size=4, seq_len=8, eval_windows=windows)
    data = PretrainDataModule(
        str(split.directory), ObjectiveConfig(kind=ObjectiveKind.clm), train, SPECIALS, 1000
    )
    batches = list(data.val_dataloader())
    assert len(batches) == len(list(data.val_dataloader()))
    return torch.cat([b["input_ids"][:, 0] for b in batches]).tolist()


def test_a_large_split_is_scored_on_fixed_evenly_spaced_blocks(make_encoded):
    every = scored(make_encoded, None)
    assert len(every) == 60 * 16 // 8  # 15 tokens + EOS per document, blocks of 8
    picked = scored(make_encoded, 10)
    assert picked == [every[i * 120 // 10] for i in range(10)] == scored(make_encoded, 10)
    assert scored(make_encoded, 500) == every


def test_eval_windows_is_checked():
    with pytest.raises(ConfigError, match="train.eval_windows: got 0"):
        TrainConfig(eval_windows=0)


def test_baseline_windows_is_checked():
    from lmforge.evaluation.config import EvalConfig

    with pytest.raises(ConfigError, match="eval.baseline_windows: got -1"):
        EvalConfig(baseline_windows=-1)


def test_aligned_training_blocks_leave_evaluation_on_the_contiguous_grid(make_encoded):
    docs = counting_documents(60)
    directory = make_encoded(docs, "train").directory
    make_encoded(docs, "val")
    objective = ObjectiveConfig(kind=ObjectiveKind.clm, block_start=BlockStart.document)
    data = PretrainDataModule(str(directory), objective, TrainConfig(seq_len=8), SPECIALS, 1000)
    train, val = data.dataset("train"), data.dataset("val")
    assert (len(train), len(val)) == (60, 120)  # one block per document; every block of 8
    assert [train[j]["input_ids"][0].item() for j in range(3)] == [10, 25, 40]  # each document's start
    assert [val[i]["input_ids"][0].item() for i in range(3)] == [10, 18, 25]  # 10..17, 18..24 EOS, 25..


def test_block_start_needs_packed_blocks():
    with pytest.raises(ConfigError, match="objective.block_start: got sentence with nsp"):
        ObjectiveConfig(kind=ObjectiveKind.mlm, nsp=True, block_start=BlockStart.sentence)
