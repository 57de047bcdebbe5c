"""Training step against Hugging Face `transformers` on identical shapes and identical weights.

Each peer model is built by `transformers` from its own config, saved with `save_pretrained` and loaded
into ours with `lmforge.hf.load_pretrained`, so both start from the same weights; the first step's
losses must agree within float tolerance (the speed may not come from computing something else).
Ours runs as a user of the library would train it: the model, the pipeline's objective (which also
computes the accuracy and NLL sums it logs) and `training.optim.build_optimizer`. The peer runs the
way its documentation shows: `model(**batch).loss.backward()` and `torch.optim.AdamW`.

Shapes (the issue's): vocab 8192, d_model 256, 4 layers, 4 heads, d_ff 1024, batch 16 x 128, fp32,
dropout 0. BERT's MLM predicts 15% of the positions; ours projects only those onto the vocabulary
(the sparse head), HF all of them. T5: 128 encoder tokens, 32 decoder tokens.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from benchmarks.common import Row, interleave, matmul_peak, median, write_report
from lmforge.hf import load_pretrained
from lmforge.model.flops import training_flops
from lmforge.objectives import CausalLMObjective, MaskedLMObjective, SpanCorruptionObjective
from lmforge.objectives.masking import IGNORE_INDEX
from lmforge.training.optim import build_optimizer

VOCAB, D, LAYERS, HEADS, FF, BATCH, SEQ, DEC = 8192, 256, 4, 4, 1024, 16, 128, 32
LR = 1e-4


@dataclass
class Case:
    name: str
    peer_name: str
    hf: Callable[[], nn.Module]  # builds the peer model
    batch: Callable[[torch.Generator], dict[str, torch.Tensor]]
    objective: Callable[[nn.Module], nn.Module]  # our objective for our model
    target: float


def causal_batch(g: torch.Generator) -> dict[str, torch.Tensor]:
    ids = torch.randint(5, VOCAB, (BATCH, SEQ), generator=g)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def mlm_batch(g: torch.Generator) -> dict[str, torch.Tensor]:
    ids = torch.randint(5, VOCAB, (BATCH, SEQ), generator=g)
    chosen = torch.rand(BATCH, SEQ, generator=g) < 0.15
    return {
        "input_ids": ids.masked_fill(chosen, 4),
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": torch.zeros_like(ids),
        "labels": ids.masked_fill(~chosen, IGNORE_INDEX),
    }


def seq2seq_batch(g: torch.Generator) -> dict[str, torch.Tensor]:
    ids = torch.randint(5, VOCAB, (BATCH, SEQ), generator=g)
    labels = torch.randint(5, VOCAB, (BATCH, DEC), generator=g)
    decoder_input_ids = torch.cat([torch.zeros(BATCH, 1, dtype=torch.long), labels[:, :-1]], dim=1)
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "decoder_input_ids": decoder_input_ids,
        "decoder_attention_mask": torch.ones_like(labels),
        "labels": labels,
    }


def hf_gpt2(positions: int = SEQ) -> nn.Module:
    import transformers as t

    config = t.GPT2Config(
        vocab_size=VOCAB, n_positions=positions, n_embd=D, n_layer=LAYERS, n_head=HEADS, n_inner=FF,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, activation_function="gelu_new",
        bos_token_id=1, eos_token_id=1, pad_token_id=0,
    )  # fmt: skip
    return t.GPT2LMHeadModel(config)


def hf_bert() -> nn.Module:
    import transformers as t

    config = t.BertConfig(
        vocab_size=VOCAB, hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        intermediate_size=FF, max_position_embeddings=SEQ, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    return t.BertForMaskedLM(config)


def hf_llama(positions: int = SEQ) -> nn.Module:
    import transformers as t

    config = t.LlamaConfig(
        vocab_size=VOCAB, hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        num_key_value_heads=HEADS // 2, intermediate_size=FF, max_position_embeddings=positions,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=1, pad_token_id=0,
    )  # fmt: skip
    return t.LlamaForCausalLM(config)


def hf_t5() -> nn.Module:
    import transformers as t

    config = t.T5Config(
        vocab_size=VOCAB, d_model=D, d_kv=D // HEADS, d_ff=FF, num_layers=LAYERS,
        num_decoder_layers=LAYERS, num_heads=HEADS, dropout_rate=0.0, feed_forward_proj="relu",
        decoder_start_token_id=0,
    )  # fmt: skip
    return t.T5ForConditionalGeneration(config)


CASES = [
    Case("gpt2", "HF GPT2LMHeadModel", lambda: hf_gpt2(), causal_batch, lambda m: CausalLMObjective(), 1.5),
    Case(
        "bert-mlm",
        "HF BertForMaskedLM",
        hf_bert,
        mlm_batch,
        lambda m: MaskedLMObjective(m.config.d_model),
        2.2,
    ),
    Case(
        "llama", "HF LlamaForCausalLM", lambda: hf_llama(), causal_batch, lambda m: CausalLMObjective(), 1.3
    ),
    Case(
        "t5",
        "HF T5ForConditionalGeneration",
        hf_t5,
        seq2seq_batch,
        lambda m: SpanCorruptionObjective(),
        1.3,
    ),
]


def twins(case: Case) -> tuple[nn.Module, nn.Module]:
    """The peer model and ours with the same weights (through a save_pretrained folder)."""
    torch.manual_seed(0)
    peer = case.hf()
    with tempfile.TemporaryDirectory() as folder:
        peer.save_pretrained(folder)
        ours = load_pretrained(folder).model
    return peer, ours


def hf_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return model(**batch).loss


def step_flops(config: Any, batch: dict[str, torch.Tensor], *, sparse_head: bool) -> int:
    """Training FLOPs of one step on `batch`; with `sparse_head` only labelled positions are projected
    (our MLM head), otherwise every position (the peer's)."""
    B, T = batch["input_ids"].shape
    decoder = batch.get("decoder_input_ids")
    projected = int((batch["labels"] != IGNORE_INDEX).sum()) if sparse_head else None
    return training_flops(
        config, B, T, decoder_len=None if decoder is None else decoder.shape[1], projected=projected
    )


def measure(case: Case, rounds: int, peak: float, compile_ours: bool = False) -> Row:
    peer, ours = twins(case)
    objective = case.objective(ours)
    batch = case.batch(torch.Generator().manual_seed(1))
    # The same batch through both, before any update: the losses must agree.
    with torch.no_grad():
        loss_peer = hf_loss(peer, batch).item()
        loss_ours = objective(ours, batch)[0].item()
    opt_peer = torch.optim.AdamW(peer.parameters(), lr=LR)
    opt_ours = build_optimizer(ours, lr=LR)
    step_model: Any = torch.compile(ours) if compile_ours else ours

    def step_ours() -> None:
        loss, _ = objective(step_model, batch)
        loss.backward()
        opt_ours.step()
        opt_ours.zero_grad(set_to_none=True)

    def step_peer() -> None:
        hf_loss(peer, batch).backward()
        opt_peer.step()
        opt_peer.zero_grad(set_to_none=True)

    start = time.perf_counter()
    step_ours()  # with compile_ours: the compilation, timed apart
    first_step_s = time.perf_counter() - start
    times = interleave({"ours": step_ours, "peer": step_peer}, rounds=rounds, warmup=2)
    t_ours, t_peer = median(times["ours"]), median(times["peer"])
    tokens = batch["input_ids"].numel() + batch.get("decoder_input_ids", torch.empty(0)).numel()
    sparse = isinstance(objective, MaskedLMObjective)
    flops_ours = step_flops(ours.config, batch, sparse_head=sparse)
    flops_peer = step_flops(ours.config, batch, sparse_head=False)
    return Row(
        group="train_step",
        name=case.name + (" compiled" if compile_ours else ""),
        ours=tokens / t_ours,
        peer=tokens / t_peer,
        unit="tokens/s",
        peer_name=case.peer_name,
        mfu_ours=flops_ours / t_ours / peak,
        mfu_peer=flops_peer / t_peer / peak,
        target=case.target,
        extra={
            "loss_ours": loss_ours,
            "loss_peer": loss_peer,
            "loss_abs_diff": abs(loss_ours - loss_peer),
            "ms_ours": t_ours * 1e3,
            "ms_peer": t_peer * 1e3,
            "first_step_s": first_step_s,
        },
    )


def run(
    quick: bool = False, only: list[str] | None = None, peak: float | None = None, compiled: bool = False
) -> list[Row]:
    peak = peak or matmul_peak()
    rounds = 3 if quick else 9
    cases = [case for case in CASES if not only or case.name in only]
    rows = [measure(case, rounds, peak) for case in cases]
    if compiled:
        rows += [measure(case, rounds, peak, compile_ours=True) for case in cases]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--compile", action="store_true", help="also ours under torch.compile")
    parser.add_argument("--only", nargs="*", help="case names: " + " ".join(c.name for c in CASES))
    args = parser.parse_args()
    peak = matmul_peak()
    rows = run(args.quick, args.only, peak, args.compile)
    for row in rows:
        print(
            f"{row.name:10s} ours {row.ours:8.0f} peer {row.peer:8.0f} {row.unit} ratio {row.ratio:.2f} "
            f"mfu {row.mfu_ours:.2f}/{row.mfu_peer:.2f} dloss {row.extra['loss_abs_diff']:.1e} "
            f"first step {row.extra['first_step_s']:.1f} s"
        )
    print(f"matmul peak {peak / 1e9:.0f} GFLOP/s")
    if not args.only:
        write_report("train_step", rows, peak)


if __name__ == "__main__":
    main()
