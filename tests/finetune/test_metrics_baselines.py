"""Downstream metrics against hand-computed values (SQuAD against its official examples of
normalisation), and the baselines on tiny fixtures where the right answer is obvious."""

from __future__ import annotations

import math

import pytest
import torch

from lmforge.finetune.baselines import majority, most_frequent_tag, overlap_sentence, tfidf_logreg
from lmforge.finetune.metrics import LABEL_METRICS, entity_scores, normalize_answer, squad_scores
from lmforge.finetune.tasks import tag_scores
from lmforge.tasks.config import not_bio


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


def test_entity_scores_follow_the_conll_convention():
    gold = [["B-per", "I-per", "O", "B-loc"], ["O", "B-org", "I-org", "I-org"]]  # 3 entities
    predicted = [
        ["B-per", "I-per", "O", "B-org"],  # person right; loc typed as org: wrong
        ["O", "B-org", "I-org", "O"],  # org cut short: wrong boundary
    ]
    scores = entity_scores(["entity_precision", "entity_recall", "entity_f1"], predicted, gold)
    assert scores == pytest.approx({"entity_precision": 1 / 3, "entity_recall": 1 / 3, "entity_f1": 1 / 3})
    # conlleval reads an I- after O as the start of an entity: "O I-per I-per" holds one person
    assert entity_scores(["entity_f1"], [["O", "I-per", "I-per"]], [["O", "B-per", "I-per"]]) == {
        "entity_f1": 1.0
    }
    # no entity predicted: precision 0, not a warning or NaN
    assert entity_scores(["entity_precision"], [["O", "O"]], [["B-per", "O"]]) == {"entity_precision": 0.0}
    with pytest.raises(ValueError, match="differ"):
        entity_scores(["entity_f1"], [["O"]], [["O", "O"]])


def test_tag_scores_read_entities_from_tag_names_and_tokens_from_indices():
    labels = ["O", "B-per", "I-per", "B-loc", "I-loc"]
    gold = [[1, 2, 0, 3], [0, 0]]
    predicted = [[1, 2, 0, 0], [0, 3]]  # the person right, the loc missed, one spurious loc
    scores = tag_scores(["entity_f1", "token_accuracy"], predicted, gold, labels, None)
    assert list(scores) == ["entity_f1", "token_accuracy"]  # in the task's order
    assert scores["entity_f1"] == pytest.approx(0.5)  # p = 1/2, r = 1/2
    assert scores["token_accuracy"] == pytest.approx(4 / 6)


def test_bio_labels_are_checked():
    assert not_bio(["O", "B-per", "I-per", "B-loc"]) == []
    assert not_bio(["O", "I-per"]) == ["I-per"]  # an I- tag without its B-
    assert not_bio(["NOUN", "B-x"]) == ["NOUN", "no O"]


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
