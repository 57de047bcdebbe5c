"""Downstream metrics against hand-computed values (SQuAD against its official examples of
normalisation), and the baselines on tiny fixtures where the right answer is obvious."""

from __future__ import annotations

import math

import pytest
import torch

from lmforge.finetune.baselines import majority, most_frequent_tag, overlap_sentence, tfidf_logreg
from lmforge.finetune.metrics import LABEL_METRICS, normalize_answer, squad_scores


def test_label_metrics_equal_hand_computation():
    pred, gold = torch.tensor([0, 1, 1, 2, 2, 2]), torch.tensor([0, 1, 2, 2, 2, 0])
    assert math.isclose(LABEL_METRICS["accuracy"](pred, gold, 3), 4 / 6, rel_tol=1e-6)  # float32
    # per class F1: 0: p=1, r=1/2 -> 2/3; 1: p=1/2, r=1 -> 2/3; 2: p=2/3, r=2/3 -> 2/3
    assert math.isclose(LABEL_METRICS["macro_f1"](pred, gold, 3), 2 / 3, rel_tol=1e-6)
    binary_pred, binary_gold = torch.tensor([1, 1, 0, 0]), torch.tensor([1, 0, 1, 0])
    assert math.isclose(LABEL_METRICS["f1"](binary_pred, binary_gold, 2, 1), 0.5, rel_tol=1e-6)  # p = r = 1/2
    # the positive label is the task's choice, not index 1: label 0 has p = 1, r = 1/2 -> F1 = 2/3;
    # label 1 has p = 2/3, r = 1 -> F1 = 4/5
    binary_pred, binary_gold = torch.tensor([1, 1, 1, 0]), torch.tensor([1, 1, 0, 0])
    assert math.isclose(LABEL_METRICS["f1"](binary_pred, binary_gold, 2, 0), 2 / 3, rel_tol=1e-6)
    assert math.isclose(LABEL_METRICS["f1"](binary_pred, binary_gold, 2, 1), 4 / 5, rel_tol=1e-6)
    tags = torch.tensor([[1, 2, -100, 3]])
    assert math.isclose(
        LABEL_METRICS["token_accuracy"](torch.tensor([[1, 0, 9, 3]]), tags, 4), 2 / 3, rel_tol=1e-6
    )


def test_squad_normalisation_and_scores():
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("an apple, a pear") == "apple pear"
    scores = squad_scores(
        ["the Eiffel Tower", "in Paris France", "nothing"],
        [["Eiffel Tower"], ["Paris", "Paris, France"], ["something"]],
    )
    assert scores["exact_match"] == pytest.approx(1 / 3)  # "in paris france" is not "paris france"
    assert scores["f1"] == pytest.approx((1 + 0.8 + 0) / 3)  # p = 2/3, r = 1 against "Paris, France"


def test_majority_and_tfidf_baselines():
    assert majority([0, 1, 1, 2], 3) == [1, 1, 1]
    texts = ["great fun film", "a great movie", "dull and boring", "boring long film"] * 3
    labels = [1, 1, 0, 0] * 3
    assert tfidf_logreg(texts, labels, ["great great fun", "so boring"]) == [1, 0]
    pairs = ["great fun film", "a great movie", "tax law vote", "boring long film"] * 3
    same = [1, 1, 0, 1] * 3
    assert tfidf_logreg(texts, same, ["dull and boring"], pairs, ["dull and boring"]) == [1]


def test_most_frequent_tag_and_overlap_sentence():
    words = [["The", "dog", "runs"], ["the", "run", "ended"]]
    tags = [[0, 1, 2], [0, 1, 2]]
    assert most_frequent_tag(words, tags, [["THE", "dog", "zebra"]]) == [[0, 1, 0]]  # zebra: overall
    context = "Paris is large. The tower stands in Paris and is tall! Rome is old."
    assert (
        overlap_sentence("Where does the tower stand?", context) == "The tower stands in Paris and is tall!"
    )
