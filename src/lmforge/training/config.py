"""Structured configs of the `objective`, `optim` groups and the top-level `train` section.

Merged onto these dataclasses when a stage starts, so a wrong type or range fails at once with a
one-line ConfigError naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from lmforge.errors import ConfigError
from lmforge.structured import Group

# The learning-rate schedules of `lmforge.training.schedules.SCHEDULES` (named here so that parsing a
# config imports no torch; a test keeps the two equal).
SCHEDULES = ("noam", "linear", "cosine", "constant", "wsd")
DECAYING = ("linear", "cosine", "wsd")  # the schedules that end at trainer.max_steps
ALGORITHMS = ("adamw", "muon")  # lmforge.training.optim


class ObjectiveKind(str, Enum):
    clm = "clm"  # GPT next-token prediction on packed blocks
    mlm = "mlm"  # BERT / RoBERTa masked language modelling (+ optional NSP)
    span_corruption = "span_corruption"  # T5 denoising of dropped spans
    seq2seq = "seq2seq"  # plain source -> target pairs (translation); trains on pairs, not a corpus


class BlockStart(str, Enum):
    """Where a packed training block may start (lmforge.data.datasets.PackedDataset); evaluation
    always reads the contiguous grid, so runs that differ in this knob score the same windows."""

    any = "any"  # contiguous blocks: block k is stream[k*n : (k+1)*n]
    sentence = "sentence"  # block k moved forward to the first sentence start at or after k*n
    document = "document"  # one block per document, from its start (the speedrun's aligned batches)


@dataclass(frozen=True)
class ObjectiveConfig:
    name: str = "clm"  # label used in run names
    kind: ObjectiveKind = ObjectiveKind.clm
    nsp: bool = False  # mlm: add next-sentence prediction on [CLS] A [SEP] B [SEP] pairs (BERT)
    dynamic_masking: bool = True  # fresh masks/spans each epoch (RoBERTa) or fixed instances (BERT)
    dupe_factor: int = 10  # static only: copies of each example, each with its own mask and NSP pair
    mlm_probability: float = 0.15  # mlm: share of tokens selected for prediction in training
    # mlm: the share validation and evaluation select, fixed so that losses and accuracies of runs
    # trained at different rates (Wettig et al. 2023 train at 40%) measure the same task
    eval_mlm_probability: float = 0.15
    noise_density: float = 0.15  # span_corruption: share of tokens dropped
    mean_span_length: float = 3.0  # span_corruption: mean length of a dropped span
    label_smoothing: float = 0.0  # Szegedy et al. 2016; 0.1 in the 2017 Transformer
    # rows per chunk of the fused vocabulary projection + cross-entropy, which never holds the
    # (tokens, vocab) logits (objectives/losses.py; benchmarks/linear_ce.py); null: the head's logits
    loss_chunk: int | None = 128
    # packed objectives' training blocks: contiguous (any), or starting at a sentence or a document
    block_start: BlockStart = BlockStart.any

    def __post_init__(self) -> None:
        if self.dupe_factor < 1:
            raise ConfigError(f"objective.dupe_factor: got {self.dupe_factor}, expected an integer >= 1")
        for key in ("mlm_probability", "eval_mlm_probability", "noise_density"):
            if not 0.0 < getattr(self, key) < 1.0:
                raise ConfigError(f"objective.{key}: got {getattr(self, key)}, expected a value in (0, 1)")
        if self.loss_chunk is not None and self.loss_chunk < 1:
            raise ConfigError(
                f"objective.loss_chunk: got {self.loss_chunk}, expected an integer >= 1 or null"
            )
        if self.nsp and self.kind is not ObjectiveKind.mlm:
            raise ConfigError(
                f"objective.nsp: got true for kind={self.kind.value}, expected it only with mlm"
            )
        if self.block_start is not BlockStart.any and (self.nsp or self.kind is ObjectiveKind.seq2seq):
            raise ConfigError(
                f"objective.block_start: got {self.block_start.value} with "
                f"{'nsp' if self.nsp else self.kind.value}, whose examples are not packed blocks; expected any"
            )


@dataclass(frozen=True)
class OptimConfig:
    name: str = "adamw"
    lr: float = 2e-3  # peak learning rate (noam: a factor on the paper's rate)
    weight_decay: float = 0.1  # AdamW decay on matrices only
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    eps: float = 1e-8
    schedule: str = "cosine"  # noam | linear | cosine | constant | wsd
    warmup_steps: int = 100
    min_lr_ratio: float | None = 0.1  # linear / cosine / wsd floor as a share of lr; None -> schedule default
    decay_fraction: float = 0.2  # wsd: share of max_steps spent decaying, at the end
    # adamw: AdamW for every parameter; muon: Muon (orthogonalised momentum, Jordan et al. 2024; torch.optim.Muon,
    # its update scaled to AdamW's RMS so `lr` means the same) for the 2-D weights inside the transformer
    # stacks, AdamW for embeddings, head, norms and biases (the speedrun's split)
    algorithm: str = "adamw"
    muon_momentum: float = 0.95  # muon: Nesterov momentum of the orthogonalised update

    def __post_init__(self) -> None:
        check_optim_values(self, "optim")
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ConfigError(f"optim.betas: got {list(self.betas)}, expected two values in [0, 1)")
        if not self.eps > 0:
            raise ConfigError(f"optim.eps: got {self.eps}, expected a value > 0")
        if self.min_lr_ratio is not None and not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ConfigError(
                f"optim.min_lr_ratio: got {self.min_lr_ratio}, expected a fraction in [0, 1] or null"
            )
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(
                f"optim.algorithm: got {self.algorithm!r}, expected one of {', '.join(ALGORITHMS)}"
            )
        if not 0.0 <= self.muon_momentum < 1.0:
            raise ConfigError(f"optim.muon_momentum: got {self.muon_momentum}, expected a value in [0, 1)")
        if not 0.0 < self.decay_fraction <= 1.0:
            raise ConfigError(f"optim.decay_fraction: got {self.decay_fraction}, expected a share in (0, 1]")


def check_optim_values(values: Any, group: str) -> None:
    """Range checks of the optimisation fields that `optim` and `finetune` share (`lr`, `weight_decay`,
    `schedule`, `warmup_steps`), named under `group`: run when the config is parsed, at the stage door."""
    if not values.lr > 0:
        raise ConfigError(f"{group}.lr: got {values.lr}, expected a learning rate > 0")
    if values.weight_decay < 0:
        raise ConfigError(f"{group}.weight_decay: got {values.weight_decay}, expected a value >= 0")
    if values.schedule not in SCHEDULES:
        raise ConfigError(
            f"{group}.schedule: got {values.schedule!r}, expected one of {', '.join(SCHEDULES)}"
        )
    if values.warmup_steps < 0:
        raise ConfigError(f"{group}.warmup_steps: got {values.warmup_steps}, expected an integer >= 0")
    if values.schedule == "noam" and values.warmup_steps < 1:
        raise ConfigError(
            f"{group}.warmup_steps: got {values.warmup_steps}, expected >= 1 with the noam schedule"
        )


def check_schedule_length(values: Any, group: str, max_steps: int, steps_key: str) -> None:
    """A decaying schedule (linear, cosine) needs a run longer than its warmup: `max_steps > warmup_steps`."""
    if values.schedule in DECAYING and max_steps <= values.warmup_steps:
        raise ConfigError(
            f"{steps_key}: got {max_steps}, expected more than {group}.warmup_steps={values.warmup_steps} "
            f"(the {values.schedule} schedule decays after its warmup)"
        )


@dataclass(frozen=True)
class TrainConfig:
    batch_size: int = 32  # sequences per optimizer step and device (before accumulation)
    seq_len: int = 128  # tokens per sequence (encoder input length for span corruption)
    num_workers: int = 0  # DataLoader worker processes
    out_dir: str = "artifacts/pretrain/run"  # checkpoints (best.ckpt, last.ckpt)
    reports_dir: str = "reports/pretrain/run"  # curves and summary metrics for DVC
    # false: start afresh; auto: continue {out_dir}/last.ckpt (weights, optimizer, schedule step, data
    # position, RNG, curves) only if it comes from this very config, data and code (so `dvc repro` after
    # an interrupted `dvc repro` continues), else afresh; true: continue it, refused when it is missing
    # or was run with another config (outputs always describe the config that made them)
    resume: Any = "auto"
    # extend a finished (or interrupted) run under a new run_name: start from that folder's last.ckpt
    # (weights, optimizer, step, data position, curves) and its best.ckpt, write only this run's folders
    extend_from: str | None = None
    checkpoint_every: int = 50  # write last.ckpt every N optimizer steps (and at the end): at most N lost
    # torch.compile the model in place (state-dict keys unchanged): a win on GPUs; on the 2-core CPU
    # it measured slower than eager (benchmarks/train_step.py --compile) and costs ~30 s to compile
    compile: bool = False
    # also keep the weights at these shares of trainer.max_steps as {out_dir}/step<N>.ckpt (weights
    # only, like best.ckpt), so the downstream effect of pretraining compute can be measured
    keep_at: list[float] = field(default_factory=lambda: [0.1, 0.3, 1.0])
    # validation and evaluation score at most this many examples of the val / test split, evenly
    # spaced across it and the same every time, so their cost stays flat as the corpus grows (Brown's
    # splits hold about 640 blocks of 128 and are scored whole); null -> every example
    eval_windows: int | None = 2048

    def __post_init__(self) -> None:
        if self.eval_windows is not None and self.eval_windows < 1:
            raise ConfigError(
                f"train.eval_windows: got {self.eval_windows}, expected null or an integer >= 1"
            )
        if not all(isinstance(f, (int, float)) and 0.0 < f <= 1.0 for f in self.keep_at):
            raise ConfigError(
                f"train.keep_at: got {list(self.keep_at)}, expected shares of max_steps in (0, 1]"
            )
        for key in ("batch_size", "seq_len", "checkpoint_every"):
            if getattr(self, key) < 1:
                raise ConfigError(f"train.{key}: got {getattr(self, key)}, expected an integer >= 1")
        if self.num_workers < 0:
            raise ConfigError(f"train.num_workers: got {self.num_workers}, expected an integer >= 0")
        if self.resume not in (True, False, "auto"):
            raise ConfigError(f"train.resume: got {self.resume!r}, expected true, false or auto")
        if not isinstance(self.compile, bool):
            raise ConfigError(f"train.compile: got {self.compile!r}, expected true or false")
        if self.extend_from is not None and Path(self.extend_from).resolve() == Path(self.out_dir).resolve():
            raise ConfigError(
                f"train.extend_from: got {self.extend_from!r}, this run's own out_dir; expected another run's "
                "folder (to continue this run, use train.resume)"
            )


PRECISIONS = ("32-true", "64-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true")


@dataclass(frozen=True)
class TrainerConfig:
    """The Lightning `Trainer` arguments we pass through (how much of a split validation scores is
    `train.eval_windows`)."""

    name: str = "cpu"  # label of the preset
    accelerator: str = "auto"  # cpu | gpu | auto: the GPU when there is one, else the CPU
    devices: Any = 1  # processes per node: an integer, -1 (all) or "auto"
    num_nodes: int = 1  # machines (torchrun or SLURM starts the processes)
    strategy: str = "auto"  # auto | ddp | fsdp | ...
    precision: str = "32-true"  # one of PRECISIONS
    max_steps: int = 500  # optimizer steps of the run (the LR schedule's length)
    val_check_interval: int = 100  # validate every N optimizer steps, counted across epochs
    check_val_every_n_epoch: int | None = None  # must stay null: validation is step-based
    gradient_clip_val: float | None = 1.0  # clip the global gradient norm; null -> off
    accumulate_grad_batches: int = 1  # micro-batches per optimizer step
    log_every_n_steps: int = 10  # train-loss logging and curve points
    enable_progress_bar: bool = True
    num_sanity_val_steps: int = 0  # validation batches run before training

    def __post_init__(self) -> None:
        for key in (
            "max_steps",
            "val_check_interval",
            "accumulate_grad_batches",
            "log_every_n_steps",
            "num_nodes",
        ):
            if getattr(self, key) < 1:
                raise ConfigError(f"trainer.{key}: got {getattr(self, key)}, expected an integer >= 1")
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"trainer.precision: got {self.precision!r}, expected one of {', '.join(PRECISIONS)}"
            )
        if self.check_val_every_n_epoch is not None:
            raise ConfigError(
                f"trainer.check_val_every_n_epoch: got {self.check_val_every_n_epoch}, expected null "
                "(validation runs every val_check_interval steps)"
            )
        if self.gradient_clip_val is not None and self.gradient_clip_val < 0:
            raise ConfigError(
                f"trainer.gradient_clip_val: got {self.gradient_clip_val}, expected null or >= 0"
            )
        if self.num_sanity_val_steps < 0:
            raise ConfigError(f"trainer.num_sanity_val_steps: got {self.num_sanity_val_steps}, expected >= 0")
        devices_ok = self.devices == "auto" or (
            isinstance(self.devices, int)
            and not isinstance(self.devices, bool)
            and (self.devices >= 1 or self.devices == -1)
        )
        if not devices_ok:
            raise ConfigError(
                f"trainer.devices: got {self.devices!r}, expected an integer >= 1, -1 or 'auto'"
            )


objective_config = Group(ObjectiveConfig, "objective")


optim_config = Group(OptimConfig, "optim")


train_config = Group(TrainConfig, "train")


trainer_config = Group(TrainerConfig, "trainer")
