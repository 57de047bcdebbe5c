"""The training stage of the induction study.

`run` (pipelines/induction.py, DVC `induction@<name>`): the pretraining recipe the command line
composes (the attention-only decoder by default), trained once per seed of `induction.seeds` on windows
of which `induction.repeat_share` repeat an earlier span, or on the synthetic task of random tokens
repeated (`induction.data`; `lmforge.induction.data`), probed every
`induction.probe_every` steps (`lmforge.induction.probe`). Writes {runs_dir}/{name}/curve.csv (one
row per seed and probe) and metrics.json: the study's outputs are the curves, which
`lmforge.induction.summary` turns into the table and figure. Weights are kept only when
`induction.keep_steps` names steps (seed<seed>/step<N>.ckpt and last.ckpt, for reading the heads'
attention maps); the DVC stages keep none.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path
from typing import Any

import lightning as L

from lmforge.errors import ConfigError
from lmforge.induction.config import InductionConfig, induction_config
from lmforge.induction.data import RepeatDataModule
from lmforge.induction.probe import InductionProbe
from lmforge.interpret.data import text_windows
from lmforge.interpret.induction import repeated_sequences
from lmforge.io import write_json, write_text
from lmforge.model.config import ModelConfig, model_config
from lmforge.stage import StageResult, read
from lmforge.tokenizer.specials import load_tokenizer
from lmforge.training.checkpoints import Checkpoints
from lmforge.training.module import PretrainModule
from lmforge.training.pretrain import TrainingPlan, encoded_inputs, prepare_run
from lmforge.training.trainer import build_trainer


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class InductionPlan(TrainingPlan):
    """The `induction` stage's plan: the study and the pretraining recipe it trains once per seed."""

    induction: InductionConfig = read(induction_config)
    model: ModelConfig = read(model_config)


COLUMNS = (
    "seed",
    "step",
    "tokens",
    "train_loss",
    "max_induction_score",
    "best_layer",
    "best_head",
    "max_shifted_score",
    "shifted_layer",
    "shifted_head",
    "shift",
    "first_copy_loss",
    "second_copy_loss",
    "repeat_gain",
    "icl_score",
    "loss",
)


def run(plan: InductionPlan) -> StageResult:
    cfg = plan.induction
    job = prepare_run(plan, plan.model)
    seq_len = job.train.seq_len
    for key in ("induction_length", "shift_length"):
        if 2 * getattr(cfg, key) + 1 > job.model.max_seq_len:
            raise ConfigError(
                f"induction.{key}: got {getattr(cfg, key)}, expected 2 * length + 1 <= the model's "
                f"max_seq_len {job.model.max_seq_len}"
            )
    if cfg.late_position + cfg.band >= seq_len - 1:
        raise ConfigError(
            f"induction.late_position: got {cfg.late_position} + band {cfg.band}, expected it within the "
            f"{seq_len - 1} predictions of a train.seq_len={seq_len} window"
        )
    if any(step > job.trainer.max_steps for step in cfg.keep_steps):
        raise ConfigError(
            f"induction.keep_steps: got {cfg.keep_steps}, expected steps within trainer.max_steps="
            f"{job.trainer.max_steps}"
        )
    if 2 * cfg.min_span > seq_len:
        raise ConfigError(
            f"induction.min_span: got {cfg.min_span}, expected two spans to fit {seq_len} tokens"
        )
    eos = job.specials.eos
    n_special = len(load_tokenizer(job.tokenizer_file).get_added_tokens_decoder())  # the first ids
    windows = text_windows(job.encoded_dir, seq_len, eos, cfg.icl_windows, job.train.batch_size)
    high = n_special + cfg.synthetic_vocab if cfg.synthetic_vocab else job.vocab_size
    if high > job.vocab_size:
        raise ConfigError(
            f"induction.synthetic_vocab: got {cfg.synthetic_vocab}, expected at most the "
            f"{job.vocab_size - n_special} non-special tokens of the tokenizer"
        )
    synthetic = (n_special, high) if cfg.data != "text" else None
    # the probe's random tokens: the synthetic task's own, else the whole vocabulary
    low_high = synthetic or (n_special, job.vocab_size)
    sequences = repeated_sequences(cfg.induction_sequences, cfg.induction_length, *low_high, eos, 0)
    shifted = repeated_sequences(cfg.induction_sequences, cfg.shift_length, *low_high, eos, 1)
    positions = (cfg.early_position, cfg.late_position, cfg.band)

    out = Path(cfg.runs_dir) / cfg.name
    rows: list[dict[str, Any]] = []
    for seed in cfg.seeds:
        L.seed_everything(seed, workers=True, verbose=False)
        data = RepeatDataModule(
            str(job.encoded_dir),
            job.objective,
            job.train,
            job.specials,
            job.vocab_size,
            seed=seed,
            share=cfg.repeat_share,
            min_span=cfg.min_span,
            max_span=cfg.max_span,
            synthetic=synthetic,
            layout=cfg.data,
        )
        module = PretrainModule(job.model, job.objective, job.optim, job.trainer.max_steps)
        probe = InductionProbe(
            sequences, shifted, windows, positions, cfg.probe_every, job.train.batch_size * seq_len
        )
        kept = (
            [Checkpoints(out / f"seed{seed}", job.trainer.max_steps, keep_steps=cfg.keep_steps)]
            if cfg.keep_steps
            else []
        )
        trainer = build_trainer(
            job.trainer,
            callbacks=[probe, *kept],
            enable_checkpointing=bool(kept),
            limit_val_batches=0,  # the probe measures the natural text; no checkpoint is chosen
            num_sanity_val_steps=0,
            default_root_dir=str(out),
        )
        trainer.fit(module, datamodule=data)
        rows += [{"seed": seed, **row} for row in probe.rows]

    write_text(out / "curve.csv", _csv(rows))
    finals = {seed: [r for r in rows if r["seed"] == seed][-1] for seed in cfg.seeds}
    metrics = {
        "repeat_share": 1.0 if cfg.data != "text" else cfg.repeat_share,
        "steps": job.trainer.max_steps,
        "seeds": len(cfg.seeds),
        **{f"max_induction_score_seed{s}": r["max_induction_score"] for s, r in finals.items()},
        **{f"max_shifted_score_seed{s}": r["max_shifted_score"] for s, r in finals.items()},
        **{f"icl_score_seed{s}": r["icl_score"] for s, r in finals.items()},
        **{f"repeat_gain_seed{s}": r["repeat_gain"] for s, r in finals.items()},
        **{f"loss_seed{s}": r["loss"] for s, r in finals.items()},
    }
    write_json(out / "metrics.json", {**metrics, "data": cfg.data})  # MLflow takes the numbers alone
    artifacts = [str(out / "curve.csv"), str(out / "metrics.json")]
    return StageResult(
        metrics, artifacts, params={"model": job.model.to_dict()}, inputs=encoded_inputs(job.encoded_dir)
    )


def _csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()} for row in rows)
    return buffer.getvalue()
