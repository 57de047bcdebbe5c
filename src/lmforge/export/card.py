"""The model card of an exported folder: `README.md`, opening with the Hub's metadata block (licence,
pipeline tag, library, the test scores as `model-index`) written by `huggingface_hub`, then what a
reader needs before using the weights: what the model is, the data it saw and that data's licence,
its scores beside the unigram baseline of the same tokens, how to load it, and what it is not for
(Mitchell et al. 2019, "Model Cards for Model Reporting").

Every fact comes from a file the pipeline wrote: the evaluate stage's report (`reports/eval/<run>.json`:
test loss, perplexity and accuracy of the model and of the unigram baseline) and the data card's
`## Source` section (`reports/data_card.md`: source, archive, sha256, licence).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from lmforge.errors import DataError
from lmforge.model.config import Family

PIPELINE_TAGS = {
    Family.encoder: "fill-mask",
    Family.decoder: "text-generation",
    Family.encoder_decoder: "text2text-generation",
}
WHAT = {  # the objective it learned, and what its accuracy counts
    Family.encoder: ("masked-language model", "masked tokens predicted"),
    Family.decoder: ("causal language model", "next tokens predicted"),
    Family.encoder_decoder: ("span-corruption encoder-decoder", "target tokens predicted"),
}
EVAL_KEYS = ("test_loss", "test_perplexity", "test_accuracy", "test_n_tokens", "unigram_loss",
             "unigram_perplexity", "unigram_accuracy")  # fmt: skip
SOURCE = re.compile(r"^- \*\*(?P<key>[^*]+)\*\*: (?P<value>.+)$")


def _reason(err: Exception) -> str:
    return err.strerror if isinstance(err, OSError) and err.strerror else str(err)


def evaluation(path: Path) -> dict[str, float]:
    """The evaluate stage's test scores of the run; one line if the report is missing or lacks one."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(
            f"{path}: unreadable ({_reason(err)}); expected the evaluate stage's report of this run for its "
            "model card (run pipelines/evaluate.py with its run_name first, or set export.eval_dir)"
        ) from None
    missing = [key for key in EVAL_KEYS if not isinstance(report.get(key), (int, float))]
    if missing:
        raise DataError(f"{path}: no number for {missing[0]}; expected the evaluate stage's report")
    return {key: float(report[key]) for key in EVAL_KEYS}


def data_source(path: Path) -> tuple[str, dict[str, str]]:
    """(corpus name, the `## Source` bullets) of a data card written by the prepare stage."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(
            f"{path}: unreadable ({_reason(err)}); expected the prepare stage's data card of the corpus "
            "it was trained on (set export.data_card)"
        ) from None
    name = (
        lines[0].removeprefix("# Data card: ").strip()
        if lines and lines[0].startswith("# Data card:")
        else ""
    )
    facts: dict[str, str] = {}
    if "## Source" in lines:
        for line in lines[lines.index("## Source") + 1 :]:
            if line.startswith("## "):
                break
            if match := SOURCE.match(line):
                facts[match["key"]] = match["value"]
    if not name or "licence" not in facts:
        raise DataError(f"{path}: no corpus name or licence in its Source section; expected a data card")
    return name, facts


def model_card(
    run: str, family: Family, architecture: str, model_type: str, parameters: int, auto_class: str,
    scores: dict[str, float], corpus: str, source: dict[str, str],
) -> str:  # fmt: skip
    """README.md of the folder: the metadata block, then the card."""
    kind, counted = WHAT[family]
    tag = PIPELINE_TAGS[family]
    results = [
        EvalResult(task_type=tag, dataset_type=corpus, dataset_name=f"{corpus} (lmforge split)", dataset_split="test",
                   metric_type=metric, metric_name=name, metric_value=round(scores[key], 4))
        for metric, name, key in (("perplexity", "test perplexity", "test_perplexity"),
                                  ("accuracy", f"accuracy ({counted})", "test_accuracy"),
                                  ("loss", "test loss (nats per token)", "test_loss"))
    ]  # fmt: skip
    data = ModelCardData(
        language="en", license="other", license_name="training-data-licence", library_name="transformers",
        pipeline_tag=tag, tags=["lmforge", model_type], model_name=f"lmforge-{run}", eval_results=results,
    )  # fmt: skip
    rows = [
        ("loss (nats per token)", f"{scores['test_loss']:.3f}", f"{scores['unigram_loss']:.3f}"),
        ("perplexity", f"{scores['test_perplexity']:.1f}", f"{scores['unigram_perplexity']:.1f}"),
        (f"accuracy ({counted})", f"{scores['test_accuracy']:.1%}", f"{scores['unigram_accuracy']:.1%}"),
    ]
    facts = "\n".join(f"- **{key}**: {value}" for key, value in source.items())
    body = f"""
# lmforge-{run}

A {kind} of {parameters:,} parameters ({architecture}), pretrained from scratch by lmforge's
`pretrain@{run}` stage on the {corpus} corpus and exported by `export@{run}`: a small model for
teaching and research.

## Scores on the test split

| | this model | unigram baseline |
|---|---|---|
{chr(10).join(f"| {name} | {ours} | {baseline} |" for name, ours, baseline in rows)}

Scored on {int(scores["test_n_tokens"]):,} tokens of the held-out test split; the baseline predicts every
token from its training frequency alone, with the same tokenizer.

## Training data

{facts}

The weights are derived from this data and carry its licence; lmforge's code is MIT-licensed.

## How to use

```python
from transformers import {auto_class}, AutoTokenizer

model = {auto_class}.from_pretrained("path/to/this/folder")
tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder")
```

## Intended use and limits

- For studying how Transformers learn (attention maps, probing, fine-tuning from a known
  checkpoint), not for any product or decision about people.
- English only, and only the English of its corpus; it has had no instruction or safety tuning.
- Small and briefly trained: read the scores above before relying on any output. What it predicts
  echoes its corpus, the corpus's views and biases included.
"""
    return ModelCard(f"---\n{data.to_yaml()}\n---\n{body}").content


def card_for(run: str, family: Family, architecture: str, model_type: str, parameters: int, auto_class: str,
             eval_report: Path, data_card: Path) -> str:  # fmt: skip
    corpus, source = data_source(data_card)
    return model_card(run, family, architecture, model_type, parameters, auto_class, evaluation(eval_report),
                      corpus, source)  # fmt: skip


def card_facts(card: str) -> dict[str, Any]:
    """The metadata block of a card, as the Hub reads it (for tests and readers)."""
    return ModelCard(card).data.to_dict()
