"""Reading an importer's rename rules backwards: every name the export writes, renamed forwards by the
importer (`lmforge.hf.load.rename`), is the name of ours it came from; the parts of a rule with no one
text are written canonically or refused; a name no rule writes is an error."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lmforge.errors import DataError
from lmforge.hf.architectures import ARCHITECTURES
from lmforge.hf.bert import BERT_RULES
from lmforge.hf.gpt2 import GPT2_RULES
from lmforge.hf.gpt_neox import GPT_NEOX_RULES
from lmforge.hf.llama import LLAMA_RULES
from lmforge.hf.load import rename
from lmforge.hf.rename import Group, backward, backwards, pieces, prefixed, readable
from lmforge.model import build_model
from lmforge.model.config import ModelConfig

SMALL = dict(vocab_size=50, d_model=16, n_layers=2, n_heads=2, d_ff=32, max_seq_len=16)
BERT = dict(family="encoder", n_segments=2, head_transform=True, head_bias=True, embedding_norm=True,
            final_norm=False, norm_placement="post", tie_embeddings=False)  # fmt: skip
CASES = {  # model_type: (its rules, ModelConfig values of a model whose every tensor they cover)
    "bert": (BERT_RULES, BERT),
    "gpt2": (GPT2_RULES, dict(position="learned", tie_embeddings=False)),
    "gpt_neox": (GPT_NEOX_RULES, dict(position="rope")),
    "llama": (LLAMA_RULES, dict(position="rope", norm="rms", activation="swiglu", bias=False, n_kv_heads=1)),
}


def test_a_pattern_splits_into_text_and_capturing_groups():
    assert pieces(r"h\.(\d+)\.ln_1\.(weight|bias)") == [
        *"h.",
        Group(1, r"\d+"),
        *".ln_1.",
        Group(2, "weight|bias"),
    ]


def test_an_optional_group_is_written_without_its_text():
    rule = backward(r"cls\.predictions\.(?:decoder\.)?bias", "head.proj.bias")
    assert rule.ours.fullmatch("head.proj.bias")
    assert "".join(rule.hf) == "cls.predictions.bias"


@pytest.mark.parametrize(
    "pattern",
    [r"(?:embed_out|lm_head)\.weight", r"h\.\d+\.x", r"a.b", r"(x)?y", r"[ab]c"],
    ids=["alternation", "class", "wildcard", "optional-capture", "set"],
)
def test_a_part_with_no_one_text_is_refused(pattern):
    with pytest.raises(ValueError, match="rename rule"):
        backward(pattern, "head.proj.weight")


def test_a_group_the_replacement_drops_cannot_be_read_backwards():
    with pytest.raises(ValueError, match="group 2"):
        backward(r"(a|b)\.(c|d)", r"x.\1")


def test_rules_that_keep_a_tensor_aside_or_rename_by_a_function_are_not_read_backwards():
    rules = [(r"a", None), (r"b", lambda m: "x"), (r"c", "y")]
    assert [rule.hf for rule in readable(rules)] == [("c",)]


@pytest.mark.parametrize("model_type", CASES)
def test_every_name_written_renames_forwards_to_the_name_it_came_from(model_type):
    rules, values = CASES[model_type]
    state = build_model(ModelConfig(**SMALL, **values)).state_dict()
    if model_type != "bert":  # GPT-2 / NeoX / LLaMA: the untied head is written by `untied_head`
        state.pop("head.proj.weight")
    written = backwards(state, rules)
    assert len(written) == len(state)
    back, extra = rename(written, ARCHITECTURES[model_type], Path("export"))
    assert extra == {}
    assert sorted(back) == sorted(state)
    assert all(back[name] is tensor for name, tensor in state.items())


def test_a_name_no_rule_writes_is_an_error():
    with pytest.raises(DataError, match="no rename rule writes stack.layers.0.attn.rel_bias"):
        backwards({"stack.layers.0.attn.rel_bias": torch.zeros(1)}, GPT2_RULES)


def test_two_names_written_alike_are_an_error():
    rules = [(r"x\.(weight|bias)", r"a.\1"), (r"x\.(weight|bias)", r"b.\1")]
    with pytest.raises(DataError, match="both become x.weight"):
        backwards({"a.weight": torch.zeros(1), "b.weight": torch.zeros(1)}, rules)


def test_heads_stay_outside_the_base_models_prefix():
    state = {"encoder.layer.0.x": 1, "cls.predictions.bias": 2}
    assert prefixed(state, "bert.", outside=("cls.",)) == {
        "bert.encoder.layer.0.x": 1,
        "cls.predictions.bias": 2,
    }
