"""The fine-tuning module learns each kind of task on a tiny fixture (a few Lightning steps on CPU),
scores whole splits with the task's metrics, and refuses a family that cannot do the task."""

from __future__ import annotations

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader

from helpers import tiny, tiny_wordpiece
from lmforge.errors import ConfigError
from lmforge.finetune.examples import Collator, encode
from lmforge.finetune.module import FinetuneModule, evaluate
from lmforge.model.config import ModelConfig
from lmforge.tasks.config import task_config
from lmforge.training.config import OptimConfig

OPTIM = OptimConfig(lr=3e-3, weight_decay=0.0, schedule="constant", warmup_steps=1)
TEXTS = ["the old tower", "paris is old", "the tower runs", "where does paris stand"]


def model_values(family: str) -> ModelConfig:
    return tiny(family=family, vocab_size=20, n_segments=2 if family == "encoder" else 0, max_seq_len=32)


def records(kind: str) -> tuple[list[dict], list[str]]:
    if kind == "classification":
        return [
            {"id": str(i), "text": t, "label": "yes" if "tower" in t else "no"} for i, t in enumerate(TEXTS)
        ], ["no", "yes"]
    if kind == "tagging":
        rows = [
            {
                "id": str(i),
                "words": t.split(),
                "tags": ["N" if w in ("tower", "paris") else "O" for w in t.split()],
            }
            for i, t in enumerate(TEXTS)
        ]
        return rows, ["N", "O"]
    context = "The old tower is in Paris."
    question = {"id": "q", "question": "Where does the tower stand?", "context": context}
    rows = [
        {**question, "id": f"q{i}", "answer_text": "in Paris", "answer_start": context.index("in Paris")}
        for i in range(4)
    ]
    return rows, []


def fit(module: FinetuneModule, loader: DataLoader, steps: int) -> None:
    trainer = L.Trainer(
        max_steps=steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )
    trainer.fit(module, loader)


@pytest.mark.parametrize(
    "kind, family, metric",
    [
        ("classification", "encoder", "accuracy"),
        ("classification", "decoder", "macro_f1"),
        ("classification", "encoder_decoder", "accuracy"),  # text-to-text: the label as words
        ("tagging", "decoder", "token_accuracy"),
        ("qa", "encoder", "exact_match"),
    ],
)
def test_each_task_kind_learns_its_fixture(kind, family, metric):
    torch.manual_seed(0)
    rows, labels = records(kind)
    features = encode(kind, rows, tiny_wordpiece(), labels, max_len=32, train=True).features
    loader = DataLoader(features, batch_size=4, collate_fn=Collator(pad_id=0))
    task = task_config(
        {"name": "t", "kind": kind, "source": "local", "labels": labels or None, "metrics": [metric]}
    )
    label_ids = [[5 + i, 3] for i in range(len(labels))]  # text-to-text targets: a word, then [SEP]
    module = FinetuneModule(model_values(family), task, OPTIM, 60, head_dropout=0.0, label_ids=label_ids)
    fit(module, loader, steps=60)
    assert evaluate(module, loader)[metric] == 1.0


def test_a_family_that_cannot_do_the_task_is_one_line():
    task = task_config({"name": "squadlike", "kind": "qa", "source": "local", "metrics": ["exact_match"]})
    with pytest.raises(
        ConfigError, match="model.family: got decoder for task squadlike \\(qa\\), expected one of: encoder"
    ):
        FinetuneModule(model_values("decoder"), task, OPTIM, max_steps=1)
