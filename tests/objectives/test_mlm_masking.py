"""MLM masking (Devlin et al. 2018): rates within statistical bounds, specials untouched, masks keyed by
(seed, draw, example)."""

from __future__ import annotations

import pickle

import pytest
import torch

from lmforge.errors import ConfigError
from lmforge.objectives.collate import MLMCollator
from lmforge.objectives.masking import IGNORE_INDEX, MLMMasker
from lmforge.objectives.rng import ExampleRNG, mix_seed

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIALS = [PAD, UNK, CLS, SEP, MASK]
VOCAB = 1000


def _sample(n_tokens: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(len(SPECIALS), VOCAB, (n_tokens,), generator=g)  # ordinary tokens only


def _within(observed: float, expected: float, n: int, sigmas: float = 5.0) -> bool:
    """|observed - expected| below `sigmas` binomial standard deviations."""
    return abs(observed - expected) <= sigmas * (expected * (1 - expected) / n) ** 0.5


def test_selection_and_80_10_10_rates_within_binomial_bounds():
    ids = _sample(200_000)
    masker = MLMMasker(MASK, VOCAB, SPECIALS, mlm_probability=0.15)
    corrupted, labels = masker(ids, torch.Generator().manual_seed(1))
    selected = labels != IGNORE_INDEX
    n_selected = int(selected.sum())
    assert _within(n_selected / len(ids), 0.15, len(ids))
    assert torch.equal(labels[selected], ids[selected])  # labels are the original ids
    assert torch.equal(corrupted[~selected], ids[~selected])  # unselected tokens untouched

    became_mask = corrupted[selected] == MASK
    kept = corrupted[selected] == ids[selected]
    randomised = ~became_mask & ~kept
    # A random replacement equals the original with probability 1 / (ordinary vocabulary size).
    p_same = 0.1 / (VOCAB - len(SPECIALS))
    assert _within(float(became_mask.float().mean()), 0.8, n_selected)
    assert _within(float(kept.float().mean()), 0.1 + p_same, n_selected)
    assert _within(float(randomised.float().mean()), 0.1 - p_same, n_selected)
    replacements = corrupted[selected][randomised]
    assert not torch.isin(replacements, torch.tensor(SPECIALS)).any()  # drawn from ordinary tokens only
    assert replacements.min() < 50 and replacements.max() > VOCAB - 50  # spread over the whole range


def test_special_tokens_and_padding_are_never_selected():
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, VOCAB, (50_000,), generator=g)
    ids[::3] = torch.tensor(SPECIALS).repeat(50_000 // 15 + 1)[: len(ids[::3])]
    masker = MLMMasker(MASK, VOCAB, SPECIALS, mlm_probability=0.5)
    corrupted, labels = masker(ids, torch.Generator().manual_seed(3))
    special = torch.isin(ids, torch.tensor(SPECIALS))
    assert (labels[special] == IGNORE_INDEX).all()
    assert torch.equal(corrupted[special], ids[special])
    assert (labels[~special] != IGNORE_INDEX).float().mean() > 0.45  # ordinary tokens still selected


def test_mask_id_and_out_of_range_specials_are_validated():
    with pytest.raises(ConfigError, match="mlm_probability"):
        MLMMasker(MASK, VOCAB, SPECIALS, mlm_probability=1.5)
    with pytest.raises(ConfigError, match="vocab_size"):
        MLMMasker(MASK, 10, [0, 1, 12])
    assert MASK in MLMMasker(MASK, VOCAB, [PAD]).special_ids.tolist()  # mask id is always special


def _pair_items() -> list[dict]:
    g = torch.Generator().manual_seed(4)
    items = []
    for index, (len_a, len_b) in enumerate([(5, 7), (9, 3), (4, 4)]):
        a = torch.randint(5, VOCAB, (len_a,), generator=g)
        b = torch.randint(5, VOCAB, (len_b,), generator=g)
        ids = torch.cat([torch.tensor([CLS]), a, torch.tensor([SEP]), b, torch.tensor([SEP])])
        types = torch.cat([torch.zeros(len_a + 2), torch.ones(len_b + 1)]).long()
        items.append(
            {"input_ids": ids, "token_type_ids": types, "nsp_label": index % 2, "index": 100 + index}
        )
    return items


def _collator(seed: int = 0, p: float = 0.3) -> MLMCollator:
    return MLMCollator(PAD, MASK, VOCAB, SPECIALS, mlm_probability=p, seed=seed)


def test_mask_depends_only_on_seed_draw_and_index():
    items = _pair_items()
    collate = _collator()
    first = collate(items)
    # Same example in another batch, another position, after a pickle round trip: same mask.
    again = pickle.loads(pickle.dumps(collate))([items[2], items[0]])
    n0, n2 = len(items[0]["input_ids"]), len(items[2]["input_ids"])
    assert torch.equal(again["labels"][1, :n0], first["labels"][0, :n0])
    assert torch.equal(again["input_ids"][0, :n2], first["input_ids"][2, :n2])
    # The global RNG plays no part.
    torch.manual_seed(999)
    assert torch.equal(collate(items)["labels"], first["labels"])
    # Another seed, or another draw of the same examples, gives another mask.
    assert not torch.equal(_collator(seed=1)(items)["labels"], first["labels"])
    redrawn = collate([{**item, "draw": 1} for item in items])
    assert not torch.equal(redrawn["labels"], first["labels"])


def test_masking_needs_the_index():
    item = {k: v for k, v in _pair_items()[0].items() if k != "index"}
    with pytest.raises(ConfigError, match="index"):
        _collator()([item])


def test_seed_mixing_separates_neighbouring_examples():
    seeds = {mix_seed(0, i) for i in range(1000)} | {mix_seed(1, i) for i in range(1000)}
    assert len(seeds) == 2000 and all(0 <= s < 2**63 for s in seeds)
    a = torch.rand(8, generator=ExampleRNG(0).generator(5, draw=2))
    b = torch.rand(8, generator=ExampleRNG(0).generator(5, draw=2))
    c = torch.rand(8, generator=ExampleRNG(0).generator(5, draw=3))
    assert torch.equal(a, b) and not torch.equal(a, c)
