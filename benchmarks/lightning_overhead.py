"""The pretrain step through Lightning against the same step in a bare loop: the framework's overhead.

Both train one `PretrainModule` (a GPT: vocab 8192, d_model 256, 4 layers, 4 heads, d_ff 1024,
causal LM, AdamW + warmup-cosine from `configure_optimizers`, gradient clipping at 1.0 as
`conf/trainer/cpu.yaml`) on the same fixed in-memory batches of 16 x 128 random token ids.

- bare step: `loss, _ = module(batch)`, backward, clip, `opt.step()`, `opt.zero_grad()`,
  `sched.step()`; everything the pipeline's run needs and nothing else.
- Lightning: `Trainer.fit` on a DataLoader over the batches; adds `training_step`'s logging, the
  loops, hooks, closures and the loader. A callback times from the start of batch `warm` to the end
  of the last batch, so the Trainer's start-up (reported apart) and the first steps are left out.

A round runs a fresh Trainer, then the bare loop on the same number of steps (order alternating,
see `common.interleave`). ratio = Lightning / bare throughput: below 1 is the overhead.
"""

from __future__ import annotations

import argparse
import logging
import time
import warnings
from typing import Any

import lightning as L
import torch
from lightning.fabric.utilities.warnings import PossibleUserWarning
from torch.utils.data import DataLoader

from benchmarks.common import Row, interleave, matmul_peak, median, write_report
from lmforge.model.config import load_model_config
from lmforge.training.config import ObjectiveConfig, ObjectiveKind, OptimConfig
from lmforge.training.module import PretrainModule

GROUP = "lightning"
MODEL = load_model_config({  # conf/model/gpt_tiny.yaml at the benchmark width
    "family": "decoder", "vocab_size": 8192, "d_model": 256, "n_layers": 4, "n_heads": 4,
    "d_ff": 1024, "max_seq_len": 128, "position": "learned", "norm": "layer",
    "norm_placement": "pre", "activation": "gelu", "dropout": 0.0,
})  # fmt: skip
OBJECTIVE = ObjectiveConfig(name="clm", kind=ObjectiveKind.clm)  # conf/objective/clm.yaml
OPTIM = OptimConfig(  # conf/optim/adamw.yaml
    name="adamw", lr=2e-3, weight_decay=0.1, betas=[0.9, 0.95], eps=1e-8,
    schedule="cosine", warmup_steps=100, min_lr_ratio=0.1,
)  # fmt: skip
CLIP = 1.0  # conf/trainer/cpu.yaml gradient_clip_val

Batch = dict[str, torch.Tensor]


def build_module(max_steps: int = 500) -> PretrainModule:
    torch.manual_seed(0)
    return PretrainModule(MODEL, OBJECTIVE, OPTIM, max_steps)


def random_batches(n: int, batch_size: int = 16, seq_len: int = 128) -> list[Batch]:
    """What `CausalLMCollator` returns for packed blocks: input_ids and labels, nothing padded."""
    g = torch.Generator().manual_seed(1)
    ids = [torch.randint(102, MODEL.vocab_size, (batch_size, seq_len), generator=g) for _ in range(n)]
    return [{"input_ids": x, "labels": x.clone()} for x in ids]


def optimizers(module: PretrainModule) -> tuple[torch.optim.Optimizer, Any]:
    """A fresh optimizer and schedule from `configure_optimizers`, as each `Trainer.fit` makes."""
    config = module.configure_optimizers()
    return config["optimizer"], config["lr_scheduler"]["scheduler"]


def bare_step(module: PretrainModule, opt: torch.optim.Optimizer, sched: Any, batch: Batch) -> None:
    """One optimizer step with everything the pipeline's run needs and nothing else."""
    loss, _ = module(batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(module.parameters(), CLIP)
    opt.step()
    opt.zero_grad()
    sched.step()


def bare_steps(module: PretrainModule, batches: list[Batch], warm: int) -> float:
    """Seconds per step over steps `warm`.. of a plain training loop."""
    module.train()
    opt, sched = optimizers(module)
    start = time.perf_counter()
    for i, batch in enumerate(batches):
        if i == warm:
            start = time.perf_counter()
        bare_step(module, opt, sched, batch)
    return (time.perf_counter() - start) / (len(batches) - warm)


class StepClock(L.Callback):
    """Times batches `warm`..last (start hook of batch `warm` to end hook of the last) and the start-up."""

    def __init__(self, warm: int) -> None:
        self.warm = warm
        self.created = time.perf_counter()
        self.first = self.start = self.end = 0.0

    def on_train_batch_start(
        self, trainer: L.Trainer, module: L.LightningModule, batch: Any, idx: int
    ) -> None:
        now = time.perf_counter()
        if idx == 0:
            self.first = now
        if idx == self.warm:
            self.start = now

    def on_train_batch_end(
        self, trainer: L.Trainer, module: L.LightningModule, out: Any, batch: Any, idx: int
    ) -> None:
        self.end = time.perf_counter()


def minimal_trainer(max_steps: int, callback: L.Callback, **kwargs: Any) -> L.Trainer:
    """A CPU Trainer that only trains: no logger, checkpoints, progress bar, summary or validation."""
    return L.Trainer(
        accelerator="cpu", devices=1, max_steps=max_steps, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, gradient_clip_val=CLIP,
        num_sanity_val_steps=0, limit_val_batches=0, callbacks=[callback], **kwargs,
    )  # fmt: skip


def lightning_steps(module: PretrainModule, batches: list[Batch], warm: int) -> tuple[float, float]:
    """(seconds per step over steps `warm`.., seconds from creating the Trainer to the first batch)."""
    clock = StepClock(warm)
    minimal_trainer(len(batches), clock).fit(module, DataLoader(batches, batch_size=None))
    return (clock.end - clock.start) / (len(batches) - warm), clock.first - clock.created


def quiet() -> None:
    """No Lightning banners or warnings about few workers, short epochs and pytree deprecations."""
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=PossibleUserWarning)
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")


def run(quick: bool = False) -> list[Row]:
    quiet()
    steps, warm, rounds = (3, 1, 2) if quick else (5, 1, 6)
    batches = random_batches(steps, batch_size=4 if quick else 16)
    module = build_module()
    times: dict[str, list[float]] = {"lightning": [], "bare": []}
    startup: list[float] = []

    def through_lightning() -> None:
        per_step, start = lightning_steps(module, batches, warm)
        times["lightning"].append(per_step)
        startup.append(start)

    def bare() -> None:
        times["bare"].append(bare_steps(module, batches, warm))

    interleave({"lightning": through_lightning, "bare": bare}, rounds=rounds, warmup=0)
    tokens = batches[0]["input_ids"].numel()
    t_lightning, t_bare = median(times["lightning"]), median(times["bare"])
    return [
        Row(
            group=GROUP,
            name="gpt 256d pretrain step",
            ours=tokens / t_lightning,
            peer=tokens / t_bare,
            unit="tokens/s",
            peer_name="bare step",
            extra={
                "ms_lightning": t_lightning * 1e3,
                "ms_bare": t_bare * 1e3,
                "overhead_ms_per_step": (t_lightning - t_bare) * 1e3,
                "ms_per_round": {name: [round(t * 1e3) for t in ts] for name, ts in times.items()},
                "trainer_startup_s": startup,  # per round: Trainer() to the first batch's start hook
                "steps_timed_per_round": steps - warm,
                "rounds": rounds,
                "batch": list(batches[0]["input_ids"].shape),
            },
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="batches of 4, fewer steps and rounds")
    args = parser.parse_args()
    rows = run(args.quick)
    for row in rows:
        e = row.extra
        print(
            f"{row.name}: Lightning {row.ours:.0f} {row.unit} ({e['ms_lightning']:.0f} ms), bare {row.peer:.0f} "
            f"({e['ms_bare']:.0f} ms), ratio {row.ratio:.3f}; Trainer start-up {median(e['trainer_startup_s']):.2f} s"
        )
    print(f"wrote {write_report(GROUP, rows, matmul_peak())}")


if __name__ == "__main__":
    main()
