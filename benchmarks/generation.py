"""Greedy generation with the KV cache against Hugging Face `generate`, same weights, same prompts.

GPT-2 and LLaMA models of `train_step` (d_model 256, 4 layers, vocab 8192) with 256 positions, so
that a 16-token prompt plus 128 new tokens fit, batch 1 and 8, 128 new tokens, no early stop. Both sides
decode greedily, so they must produce the same tokens; the row records whether they did. Ours is
`lmforge.model.generation.generate` (temperature 0), the peer `model.generate(do_sample=False)`.
A third measurement is ours without the cache (every step re-reads the whole sequence), the
baseline the cache is for.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable

import torch
from torch import nn

from benchmarks.common import Row, interleave, matmul_peak, median, write_report
from benchmarks.train_step import hf_gpt2, hf_llama
from lmforge.hf import load_pretrained
from lmforge.model.generation import generate

VOCAB, POSITIONS, PROMPT, NEW = 8192, 256, 16, 128  # the models are train_step's, with 256 positions


MODELS: dict[str, tuple[str, Callable[[], nn.Module]]] = {
    "gpt2": ("HF GPT2LMHeadModel.generate", lambda: hf_gpt2(POSITIONS)),
    "llama": ("HF LlamaForCausalLM.generate", lambda: hf_llama(POSITIONS)),
}
TARGETS = {1: 1.5, 8: 2.0}


def twins(build: Callable[[], nn.Module]) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    peer = build().eval()
    with tempfile.TemporaryDirectory() as folder:
        peer.save_pretrained(folder)
        ours = load_pretrained(folder).model.eval()
    return peer, ours


def measure(name: str, batch: int, rounds: int, new: int) -> list[Row]:
    peer_name, build = MODELS[name]
    peer, ours = twins(build)
    prompt = torch.randint(5, VOCAB, (batch, PROMPT), generator=torch.Generator().manual_seed(batch))
    outputs: dict[str, torch.Tensor] = {}

    def run_ours(use_cache: bool = True) -> None:
        outputs["ours"] = generate(ours, prompt, max_new_tokens=new, temperature=0, use_cache=use_cache)

    @torch.no_grad()
    def run_peer() -> None:
        outputs["peer"] = peer.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=new,
            min_new_tokens=new,
            do_sample=False,
            pad_token_id=0,
        )

    times = interleave(
        {"ours": run_ours, "peer": run_peer, "no_cache": lambda: run_ours(False)},
        rounds=rounds,
        warmup=1,
    )
    same = torch.equal(outputs["ours"], outputs["peer"])
    tokens = batch * new
    t_ours, t_peer, t_plain = (median(times[k]) for k in ("ours", "peer", "no_cache"))
    extra = {"same_tokens": same, "ms_ours": t_ours * 1e3, "ms_peer": t_peer * 1e3}
    return [
        Row(
            "generation",
            f"{name} batch{batch}",
            tokens / t_ours,
            tokens / t_peer,
            "tokens/s",
            peer_name,
            target=TARGETS[batch],
            extra=extra,
        ),  # fmt: skip
        Row(
            "generation",
            f"{name} batch{batch} cache",
            tokens / t_ours,
            tokens / t_plain,
            "tokens/s",
            "ours without KV cache",
            extra={"ms_no_cache": t_plain * 1e3},
        ),  # fmt: skip
    ]


def run(quick: bool = False, only: list[str] | None = None) -> list[Row]:
    rounds, new = (2, 32) if quick else (5, NEW)
    rows: list[Row] = []
    for name in MODELS:
        if only and name not in only:
            continue
        for batch in (1, 8):
            rows += measure(name, batch, rounds, new)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", help="models: " + " ".join(MODELS))
    args = parser.parse_args()
    rows = run(args.quick, args.only)
    for row in rows:
        print(
            f"{row.name:20s} ours {row.ours:8.0f} {row.peer_name:32s} {row.peer:8.0f} ratio {row.ratio:.2f} {row.extra}"
        )
    if not args.only and not args.quick:
        write_report("generation", rows, matmul_peak())


if __name__ == "__main__":
    main()
