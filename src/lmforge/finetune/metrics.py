"""Downstream metrics, one function per metric name a task config may list.

Classification scores come from torchmetrics (accuracy, macro-F1, binary F1 of the label the task
names `positive_label`);
tagging is token accuracy over labelled positions only (sub-word continuations carry no label) and,
for BIO tag sets (NER), entity precision, recall and F1 in the CoNLL convention (seqeval's default
mode, as conlleval: an I- tag after O or another type opens an entity; micro average over types);
extractive QA is SQuAD v1.1's exact match and token F1 with the official answer normalisation
(lowercase, punctuation and the articles a/an/the removed, whitespace collapsed), the best score over
the gold answers of a question. Every function returns a fraction in [0, 1].
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

import torch
from seqeval.metrics import f1_score, precision_score, recall_score
from torchmetrics.functional.classification import binary_f1_score, multiclass_accuracy, multiclass_f1_score

from lmforge.objectives.masking import IGNORE_INDEX


def accuracy(pred: torch.Tensor, gold: torch.Tensor, n_labels: int, positive: int | None = None) -> float:
    return float(multiclass_accuracy(pred, gold, n_labels, average="micro"))


def macro_f1(pred: torch.Tensor, gold: torch.Tensor, n_labels: int, positive: int | None = None) -> float:
    return float(multiclass_f1_score(pred, gold, n_labels, average="macro"))


def f1(pred: torch.Tensor, gold: torch.Tensor, n_labels: int, positive: int | None = None) -> float:
    """F1 of the label at index `positive` (the task's `positive_label`) against all others."""
    if positive is None:
        raise ValueError("binary F1 needs the index of the positive label (task.positive_label)")
    return float(binary_f1_score((pred == positive).long(), (gold == positive).long()))


def token_accuracy(
    pred: torch.Tensor, gold: torch.Tensor, n_labels: int, positive: int | None = None
) -> float:
    keep = gold != IGNORE_INDEX
    return float((pred[keep] == gold[keep]).float().mean()) if keep.any() else 0.0


# (predicted, gold, number of labels, index of the positive label or None) -> score
LABEL_METRICS: dict[str, Callable[[torch.Tensor, torch.Tensor, int, int | None], float]] = {
    "accuracy": accuracy,
    "macro_f1": macro_f1,
    "f1": f1,
    "token_accuracy": token_accuracy,
}


# -- entities of BIO tag sequences -------------------------------------------------------------------

ENTITY_SCORES: dict[str, Callable[..., float]] = {
    "entity_f1": f1_score,
    "entity_precision": precision_score,
    "entity_recall": recall_score,
}


def entity_scores(
    names: Sequence[str], predicted: Sequence[Sequence[str]], gold: Sequence[Sequence[str]]
) -> dict[str, float]:
    """The entity metrics among `names` of per-sentence BIO tag sequences (seqeval, CoNLL mode).

    No predicted entity gives precision 0 (not a warning), so a model that tags everything O scores 0.
    """
    if len(predicted) != len(gold) or any(len(p) != len(g) for p, g in zip(predicted, gold)):
        raise ValueError("predicted and gold tag sequences differ in number or length")
    pred, true = [list(p) for p in predicted], [list(g) for g in gold]
    return {name: float(ENTITY_SCORES[name](true, pred, zero_division=0)) for name in names}


# -- SQuAD v1.1 -----------------------------------------------------------------------------------


def normalize_answer(text: str) -> str:
    """The official SQuAD v1.1 normalisation."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def squad_exact(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def squad_f1(prediction: str, gold: str) -> float:
    predicted, wanted = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = sum((Counter(predicted) & Counter(wanted)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: Sequence[str], golds: Sequence[Sequence[str]]) -> dict[str, float]:
    """Mean exact match and F1, each the best over a question's gold answers."""
    if len(predictions) != len(golds) or not golds:
        raise ValueError(f"got {len(predictions)} predictions for {len(golds)} questions")
    exact = sum(max(squad_exact(p, g) for g in gs) for p, gs in zip(predictions, golds))
    f1_sum = sum(max(squad_f1(p, g) for g in gs) for p, gs in zip(predictions, golds))
    return {"exact_match": exact / len(golds), "f1": f1_sum / len(golds)}
