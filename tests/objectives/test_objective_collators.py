"""Collators: right padding, masks from lengths, labels with -100, teacher-forced decoder inputs, pickling."""

from __future__ import annotations

import pickle

import torch

from lmforge.objectives.collate import CausalLMCollator, MLMCollator, SpanCorruptionCollator, pad
from lmforge.objectives.masking import IGNORE_INDEX
from lmforge.objectives.span_corruption import restore_spans

PAD, EOS, MASK, CLS, SEP = 0, 1, 2, 3, 4
SENTINELS = [99, 98, 97, 96, 95, 94, 93, 92]


def test_causal_collator_stacks_pads_and_labels():
    items = [
        {"input_ids": torch.tensor([5, 6, 7]), "index": 0},
        {"input_ids": torch.tensor([8, EOS, 9, 10, 11]), "index": 1},
    ]
    batch = CausalLMCollator(pad_id=EOS)(items)  # a pad id that doubles as EOS
    assert batch["input_ids"].tolist() == [[5, 6, 7, EOS, EOS], [8, EOS, 9, 10, 11]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    # Padding is ignored; the real EOS inside row 1 is still a target.
    assert batch["labels"].tolist() == [[5, 6, 7, -100, -100], [8, EOS, 9, 10, 11]]


def test_causal_collator_fixed_length_blocks_are_unchanged():
    blocks = [{"input_ids": torch.arange(i, i + 8), "index": i} for i in range(3)]
    batch = pickle.loads(pickle.dumps(CausalLMCollator()))(blocks)
    assert torch.equal(batch["input_ids"], torch.stack([b["input_ids"] for b in blocks]))
    assert torch.equal(batch["labels"], batch["input_ids"]) and "attention_mask" not in batch  # fast path


def test_mlm_collator_pads_pairs_and_passes_nsp_labels():
    items = [
        {
            "input_ids": torch.tensor([CLS, 10, 11, SEP, 12, SEP]),
            "token_type_ids": torch.tensor([0, 0, 0, 0, 1, 1]),
            "nsp_label": 1,
            "index": 0,
        },
        {
            "input_ids": torch.tensor([CLS, 13, SEP, 14, SEP]),
            "token_type_ids": torch.tensor([0, 0, 0, 1, 1]),
            "nsp_label": 0,
            "index": 1,
        },
        {
            "input_ids": torch.tensor([CLS, 15, 16, 17, SEP, 18, 19, SEP]),
            "token_type_ids": torch.tensor([0, 0, 0, 0, 0, 1, 1, 1]),
            "nsp_label": 1,
            "index": 2,
        },
    ]
    collate = MLMCollator(PAD, MASK, 50, [PAD, EOS, MASK, CLS, SEP], mlm_probability=0.5, seed=0)
    batch = collate(items)
    assert batch["input_ids"].shape == batch["labels"].shape == batch["token_type_ids"].shape == (3, 8)
    assert batch["attention_mask"].tolist() == [[1] * 6 + [0] * 2, [1] * 5 + [0] * 3, [1] * 8]
    assert batch["token_type_ids"][1].tolist() == [0, 0, 0, 1, 1, 0, 0, 0]
    assert batch["nsp_labels"].tolist() == [1, 0, 1]
    padding = batch["attention_mask"] == 0
    assert (batch["input_ids"][padding] == PAD).all() and (batch["labels"][padding] == IGNORE_INDEX).all()
    special = torch.isin(batch["input_ids"], torch.tensor([CLS, SEP]))
    assert (batch["labels"][special] == IGNORE_INDEX).all()


def test_mlm_collator_on_packed_blocks_has_no_pair_keys():
    blocks = [{"input_ids": torch.arange(5, 21), "index": i} for i in range(4)]
    batch = MLMCollator(PAD, MASK, 50, [PAD, MASK])(blocks)
    assert set(batch) == {"input_ids", "attention_mask", "labels"}


def test_span_collator_builds_teacher_forced_decoder_inputs():
    g = torch.Generator().manual_seed(0)
    items = [
        {"input_ids": torch.randint(5, 90, (n,), generator=g), "index": i} for i, n in enumerate([40, 25, 60])
    ]
    collate = SpanCorruptionCollator(SENTINELS, EOS, PAD, decoder_start_id=PAD, seed=3)
    batch = pickle.loads(pickle.dumps(collate))(items)
    assert batch["input_ids"].shape[0] == batch["labels"].shape[0] == 3
    assert (batch["decoder_input_ids"][:, 0] == PAD).all()
    for b, item in enumerate(items):
        n_in = int(batch["attention_mask"][b].sum())
        n_out = int(batch["decoder_attention_mask"][b].sum())
        inputs, targets = batch["input_ids"][b, :n_in], batch["labels"][b, :n_out]
        assert (batch["labels"][b, n_out:] == IGNORE_INDEX).all() and (
            batch["input_ids"][b, n_in:] == PAD
        ).all()
        assert torch.equal(batch["decoder_input_ids"][b, 1:n_out], targets[:-1])  # shifted right
        assert torch.equal(restore_spans(inputs, targets, SENTINELS, EOS), item["input_ids"])
    # Static corruption: the same example, alone in a batch, is corrupted the same way.
    alone = collate([items[1]])
    assert torch.equal(alone["labels"][0], batch["labels"][1, : alone["labels"].shape[1]])


def test_pad_right_and_left_against_hand_written_batches():
    ids, mask = pad([[1, 2, 3], [4]], value=0)
    assert ids.tolist() == [[1, 2, 3], [4, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    ids, mask = pad([[1, 2, 3], [4]], value=9, left=True)  # generation prompts end at the last column
    assert ids.tolist() == [[1, 2, 3], [9, 9, 4]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert pad([torch.tensor([5, 6])], value=-100)[0].dtype == torch.long
