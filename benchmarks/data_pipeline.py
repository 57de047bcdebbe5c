"""Is data ever the bottleneck of pretraining? Collation throughput, and the time a run waits for data.

Collation: each objective's collator, built as the datamodule builds it (`OBJECTIVES[kind].collator`,
conf/objective/{clm,roberta,span_corruption}.yaml), on in-memory items shaped as the datasets make
them (packed blocks of 128 tokens; for span corruption the raw block that corrupts to 128 inputs;
16 per batch), against the training step of the GPT of `benchmarks.lightning_overhead` (d_model 256,
4 layers, 16 x 128, bare loop), interleaved in one process. ours = collated tokens/s, peer = trained
tokens/s: ratio >> 1 means collation could feed the step many times over, in the main process.

Data wait: `PretrainDataModule` + `PretrainModule` through a Lightning Trainer on the real encoded
corpus (clm, data/encoded/bpe; in-memory random items if absent), with `num_workers=0` as
conf/train/default.yaml. A callback adds up the gaps between the end of one batch and the start of
the next (fetching, collating, Lightning's bookkeeping: an upper bound on the wait for data).
ours = tokens/s over the wall time, peer = tokens/s over the time inside batches; ratio = 1 - wait share.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from benchmarks.common import Row, interleave, matmul_peak, median, write_report
from benchmarks.lightning_overhead import (
    MODEL,
    OBJECTIVE,
    OPTIM,
    bare_step,
    build_module,
    minimal_trainer,
    optimizers,
    quiet,
    random_batches,
)
from lmforge.model.config import ModelConfig
from lmforge.objectives import CausalLMCollator
from lmforge.tokenizer.specials import SpecialTokens, load_tokenizer, special_token_ids
from lmforge.training.config import TrainConfig, objective_config
from lmforge.training.datamodule import PretrainDataModule
from lmforge.training.module import PretrainModule
from lmforge.training.objectives import OBJECTIVES, raw_length_for

GROUP = "data"
BATCH, SEQ, VOCAB = 16, 128, 8192
TOKENIZER, ENCODED = Path("artifacts/tokenizers/bpe/tokenizer.json"), Path("data/encoded/bpe")
# The special-token layouts of lmforge.tokenizer.specials, with 100 sentinels.
WORDPIECE = SpecialTokens(
    pad=0, unk=1, cls=2, sep=3, mask=4, eos=3, bos=2, sentinels=tuple(range(5, 105))
)  # fmt: skip
BPE = SpecialTokens(
    pad=0, unk=None, cls=None, sep=None, mask=None, eos=1, bos=1, sentinels=tuple(range(2, 102))
)
OBJECTIVES_CONF: dict[str, tuple[dict[str, Any], SpecialTokens]] = {  # conf/objective/*.yaml
    "clm": ({"kind": "clm"}, BPE),
    "roberta mlm": (
        {"kind": "mlm", "nsp": False, "dynamic_masking": True, "mlm_probability": 0.15},
        WORDPIECE,
    ),
    "span corruption": ({"kind": "span_corruption", "noise_density": 0.15, "mean_span_length": 3.0}, BPE),
}


def items(name: str, g: torch.Generator) -> list[dict[str, Any]]:
    """A batch of items as `Draws` over `PackedDataset` hands them to the collator."""
    o = objective_config(OBJECTIVES_CONF[name][0])
    length = raw_length_for(SEQ, o.noise_density, o.mean_span_length) if name == "span corruption" else SEQ
    out = []
    for index in range(BATCH):
        ids = torch.randint(105, VOCAB, (length,), generator=g)
        if name == "roberta mlm":  # [CLS] ... [SEP] blocks
            ids[0], ids[-1] = WORDPIECE.cls, WORDPIECE.sep
        out.append({"input_ids": ids, "index": index, "draw": 0})
    return out


def collate_call(name: str, reps: int) -> tuple[Callable[[], None], int]:
    """A function collating the same batch `reps` times, and the tokens of one batch."""
    node, specials = OBJECTIVES_CONF[name]
    o = objective_config(node)
    collate = OBJECTIVES[o.kind].collator(o, specials, VOCAB, 0)
    batch = items(name, torch.Generator().manual_seed(0))

    def call() -> None:
        for _ in range(reps):
            collate(batch)

    return call, sum(len(item["input_ids"]) for item in batch)


def collation(rounds: int, reps: int) -> list[Row]:
    module = build_module()
    opt, sched = optimizers(module)
    batch = random_batches(1, BATCH, SEQ)[0]
    calls, tokens = {"train step": lambda: bare_step(module, opt, sched, batch)}, {}
    for name in OBJECTIVES_CONF:
        calls[name], tokens[name] = collate_call(name, reps)
    times = interleave(calls, rounds=rounds, warmup=1)
    step_rate = batch["input_ids"].numel() / median(times["train step"])
    return [
        Row(
            group=GROUP,
            name=f"{name} collate {BATCH}x{SEQ}",
            ours=tokens[name] / (median(times[name]) / reps),
            peer=step_rate,
            unit="tokens/s",
            peer_name="train step",
            extra={
                "ms_per_batch": median(times[name]) / reps * 1e3,
                "ms_train_step": median(times["train step"]) * 1e3,
                "train_step": "gpt 256d clm bare step, 16x128, for every collator",
            },
        )
        for name in OBJECTIVES_CONF
    ]


class WaitClock(L.Callback):
    """Sums, from batch `warm` on, the time inside batches and the gaps between them."""

    def __init__(self, warm: int) -> None:
        self.warm = warm
        self.busy = self.wait = 0.0
        self.tokens = 0
        self.batch_start = self.last_end = 0.0

    def on_train_batch_start(
        self, trainer: L.Trainer, module: L.LightningModule, batch: Any, idx: int
    ) -> None:
        self.batch_start = time.perf_counter()
        if idx > self.warm:
            self.wait += self.batch_start - self.last_end

    def on_train_batch_end(
        self, trainer: L.Trainer, module: L.LightningModule, out: Any, batch: Any, idx: int
    ) -> None:
        self.last_end = time.perf_counter()
        if idx >= self.warm:
            self.busy += self.last_end - self.batch_start
            self.tokens += batch["input_ids"].numel()


def real_data(seed: int = 1234) -> tuple[PretrainDataModule, ModelConfig]:
    """The pretrain stage's datamodule for clm on the BPE-encoded corpus, and the model it fits."""
    tokenizer = load_tokenizer(TOKENIZER)
    specials, vocab = special_token_ids(tokenizer), tokenizer.get_vocab_size()
    train = TrainConfig(batch_size=BATCH, seq_len=SEQ, num_workers=0)
    datamodule = PretrainDataModule(str(ENCODED), OBJECTIVE, train, specials, vocab, seed)
    return datamodule, dataclasses.replace(MODEL, vocab_size=vocab, pad_token_id=specials.pad)


def data_wait(steps: int, warm: int) -> Row:
    if TOKENIZER.is_file() and ENCODED.is_dir():
        datamodule, model = real_data()
        module = PretrainModule(model, OBJECTIVE, OPTIM, 500)
        data: dict[str, Any] = {"datamodule": datamodule}
        source = f"{ENCODED} (train split), PretrainDataModule, num_workers=0"
    else:
        print(f"{ENCODED} or {TOKENIZER} missing: waiting on in-memory random items instead")
        g = torch.Generator().manual_seed(0)
        blocks = [{"input_ids": torch.randint(102, VOCAB, (SEQ,), generator=g)} for _ in range(BATCH * steps)]
        module = build_module()
        data = {"train_dataloaders": DataLoader(blocks, BATCH, shuffle=True, collate_fn=CausalLMCollator(0))}
        source = "in-memory random items, CausalLMCollator, num_workers=0 (no encoded corpus)"
    clock = WaitClock(warm)
    minimal_trainer(steps, clock, use_distributed_sampler=False).fit(module, **data)  # as the stage sets it
    wall = clock.busy + clock.wait
    return Row(
        group=GROUP,
        name=f"clm data wait {BATCH}x{SEQ}",
        ours=clock.tokens / wall,
        peer=clock.tokens / clock.busy,
        unit="tokens/s",
        peer_name="same steps without the waits",
        extra={
            "wait_share": clock.wait / wall,
            "wait_ms_per_step": clock.wait / (steps - warm - 1) * 1e3,
            "busy_ms_per_step": clock.busy / (steps - warm) * 1e3,
            "steps_timed": steps - warm,
            "data": source,
        },
    )


def run(quick: bool = False) -> list[Row]:
    quiet()
    rows = collation(rounds=2 if quick else 5, reps=5 if quick else 20)
    return [*rows, data_wait(steps=6 if quick else 30, warm=1 if quick else 2)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and steps")
    args = parser.parse_args()
    rows = run(args.quick)
    for row in rows:
        print(f"{row.name:32s} ours {row.ours:9.0f} peer {row.peer:7.0f} {row.unit} ratio {row.ratio:7.3f}")
    wait = rows[-1].extra
    print(
        f"data wait: {wait['wait_share']:.2%} of wall time ({wait['wait_ms_per_step']:.1f} ms/step; {wait['data']})"
    )
    print(f"wrote {write_report(GROUP, rows, matmul_peak())}")


if __name__ == "__main__":
    main()
