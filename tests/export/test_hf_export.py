"""Our models exported as Hugging Face folders give transformers' outputs, and read back as themselves.

Each case is a tiny random model of ours (weights perturbed so that every tensor matters) in one of
the layouts an exporter covers; transformers loads the folder with no tensor missing or unused, its
logits equal ours within 1e-5 and its greedy continuations are ours token for token; where our
importer reads the architecture, `load_pretrained(export(m))` gives m's logits.
"""

from __future__ import annotations

import json

import pytest
import torch
import transformers
from tokenizers import Tokenizer

from lmforge.errors import DataError
from lmforge.export.hf import export_pretrained, exporter_for
from lmforge.hf import load_pretrained
from lmforge.hf.architectures import ARCHITECTURES
from lmforge.hf.rotary import interleave_rotary
from lmforge.model import build_model
from lmforge.model.config import ModelConfig
from lmforge.model.generation import generate

ATOL = 1e-5
VOCAB = 97
BERT = dict(family="encoder", n_segments=2, head_transform=True, head_bias=True, embedding_norm=True,
            final_norm=False, norm_placement="post", norm_eps=1e-12)  # fmt: skip
T5 = dict(family="encoder_decoder", position="relative", norm="rms", bias=False)
CASES = {  # name: (ModelConfig values, model_type the export must pick)
    "bert": (dict(BERT, position="learned"), "bert"),
    "bert_rope": (dict(BERT, position="rope"), "roformer"),  # the default pipeline's encoder
    "gpt2": (dict(position="learned", activation="gelu_tanh"), "gpt2"),
    "gpt_rope": (dict(position="rope"), "gpt_neox"),  # the default pipeline's decoder
    "gpt_rope_untied": (dict(position="rope", tie_embeddings=False, activation="relu"), "gpt_neox"),
    "llama_gqa": (
        dict(
            position="rope",
            norm="rms",
            activation="swiglu",
            bias=False,
            n_kv_heads=2,
            tie_embeddings=False,
            rope_base=500.0,
        ),
        "llama",
    ),  # fmt: skip
    "mistral": (
        dict(position="rope", norm="rms", activation="swiglu", bias=False, sliding_window=5),
        "mistral",
    ),
    "t5": (dict(T5, activation="relu", n_encoder_layers=3), "t5"),  # scaled scores: folded into q
    "t5_v1_1": (dict(T5, activation="geglu", tie_embeddings=False, attention_scale=1.0), "t5"),
}
AUTO = {"encoder": transformers.AutoModelForMaskedLM, "decoder": transformers.AutoModelForCausalLM,
        "encoder_decoder": transformers.AutoModelForSeq2SeqLM}  # fmt: skip


def ours(values: dict) -> torch.nn.Module:
    config = ModelConfig(
        vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_seq_len=64, **values
    )
    torch.manual_seed(0)
    model = build_model(config).eval()
    with torch.no_grad():  # zero biases and unit norms would hide a wrong mapping
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


def ids(batch: int = 2, length: int = 12, seed: int = 1) -> torch.Tensor:
    return torch.randint(3, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def run(model, x, family: str, hf: bool) -> torch.Tensor:
    if family == "encoder_decoder":  # the decoder reads its own inputs
        y = ids(2, 7, seed=2)
        return model(input_ids=x, decoder_input_ids=y).logits if hf else model(x, None, y).logits
    return model(input_ids=x).logits if hf else model(x).logits


@pytest.mark.parametrize("name", CASES)
def test_transformers_reproduces_the_exported_model(name, tmp_path):
    values, model_type = CASES[name]
    model = ours(values)
    assert export_pretrained(model, tmp_path / name).model_type == model_type
    reference, info = AUTO[model.config.family.value].from_pretrained(
        tmp_path / name, output_loading_info=True
    )
    assert not any(info.values()), info  # no tensor missing, unexpected or mismatched
    x = ids()
    with torch.no_grad():
        family = model.config.family.value
        torch.testing.assert_close(
            run(reference.eval(), x, family, True), run(model, x, family, False), atol=ATOL, rtol=0
        )


@pytest.mark.parametrize("name", [n for n, (v, _) in CASES.items() if v.get("family") != "encoder"])
def test_greedy_generation_is_identical(name, tmp_path):
    model = ours(CASES[name][0])
    export_pretrained(model, tmp_path)
    reference = AUTO[model.config.family.value].from_pretrained(tmp_path).eval()
    prompts = ids(3, 6, seed=3)
    seq2seq = model.config.family.value == "encoder_decoder"
    theirs = reference.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), do_sample=False,
                                max_new_tokens=10, min_new_tokens=10, pad_token_id=0, eos_token_id=None,
                                **({"decoder_start_token_id": 0} if seq2seq else {}))  # fmt: skip
    mine = generate(
        model, prompts, max_new_tokens=10, temperature=0, decoder_start_token_id=0 if seq2seq else None
    )
    assert torch.equal(theirs, mine)


@pytest.mark.parametrize("name", [n for n, (_, t) in CASES.items() if t in ARCHITECTURES])
def test_our_importer_reads_the_export_back_as_the_same_model(name, tmp_path):
    model = ours(CASES[name][0])
    export_pretrained(model, tmp_path)
    back = load_pretrained(tmp_path).model
    x = ids()
    with torch.no_grad():
        family = model.config.family.value
        torch.testing.assert_close(
            run(back, x, family, False), run(model, x, family, False), atol=1e-6, rtol=0
        )


def test_interleaving_moves_each_half_pair_next_to_each_other():
    rows = torch.arange(8.0)  # one head of 8: pairs (0,4) (1,5) (2,6) (3,7) in rotate-half order
    assert interleave_rotary(rows, 1).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    two_heads = torch.arange(8.0).unsqueeze(1).expand(8, 3)
    assert interleave_rotary(two_heads, 2)[:, 0].tolist() == [0, 2, 1, 3, 4, 6, 5, 7]


def test_a_model_no_architecture_expresses_is_refused_in_one_line(tmp_path):
    model = ours(dict(position="alibi"))
    with pytest.raises(DataError) as err:
        export_pretrained(model, tmp_path / "out")
    text = str(err.value)
    assert "\n" not in text and "gpt_neox: model.position=alibi (expected rope)" in text
    assert not (tmp_path / "out").exists()
    with pytest.raises(DataError, match="roformer: model.rope_base=500.0"):
        exporter_for(ours(dict(BERT, position="rope", rope_base=500.0)).config)


def test_a_failed_export_leaves_the_previous_folder_as_it_was(tmp_path):
    folder = tmp_path / "hf"
    export_pretrained(ours(CASES["gpt_rope"][0]), folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(DataError, match="not a valid tokenizer.json"):
        export_pretrained(ours(CASES["gpt2"][0]), folder, tmp_path / "bad.json")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left behind


def test_the_tokenizer_loads_with_autotokenizer_and_names_its_special_tokens(tmp_path, bpe_tokenizer_file):
    tokenizer = Tokenizer.from_file(str(bpe_tokenizer_file))
    model = ours(dict(position="rope"))
    export_pretrained(model, tmp_path, bpe_tokenizer_file)
    config = json.loads((tmp_path / "config.json").read_text())
    eos = tokenizer.token_to_id("<|endoftext|>")
    assert config["eos_token_id"] == config["bos_token_id"] == eos and config["model_type"] == "gpt_neox"
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert theirs.eos_token_id == eos and theirs.pad_token_id == tokenizer.token_to_id("<pad>")
    text = "The jury said that the city had no evidence."
    assert theirs(text)["input_ids"] == tokenizer.encode(text).ids
