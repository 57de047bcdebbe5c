"""The `pretrain` stage: a tokenizer's encoded splits + model/objective/optim/trainer configs -> checkpoints.

Outputs: {train.out_dir}/best.ckpt and last.ckpt (Lightning checkpoints that rebuild the model from
their saved hyperparameters), {train.reports_dir}/{train_loss,val_loss}.csv (curves for `dvc plots`)
and {train.reports_dir}/metrics.json (for `dvc metrics show`).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from omegaconf import OmegaConf

from lmforge.config import Family, load_model_config
from lmforge.errors import ConfigError
from lmforge.io import write_json
from lmforge.model import count_parameters
from lmforge.stage import StageResult
from lmforge.tokenizer.config import tokenizer_config
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
from lmforge.tracking import active_run
from lmforge.training.callbacks import CurveWriter
from lmforge.training.config import ObjectiveKind, objective_config, optim_config, train_config
from lmforge.training.datamodule import PretrainDataModule
from lmforge.training.module import PretrainModule

FAMILY_OF = {
    ObjectiveKind.clm: Family.decoder,
    ObjectiveKind.mlm: Family.encoder,
    ObjectiveKind.span_corruption: Family.encoder_decoder,
}


def tokenizer_paths(cfg: Any) -> tuple[Path, Path]:
    """(tokenizer.json, encoded folder) of the configured tokenizer."""
    tok = tokenizer_config(cfg)
    return Path(tok.dir) / tok.name / "tokenizer.json", Path(tok.encoded_dir) / tok.name


def model_values(cfg: Any, vocab_size: int, pad_id: int, seq_len: int) -> dict[str, Any]:
    """The model group with what the data decides: vocabulary size and padding id."""
    values = OmegaConf.to_container(cfg.model, resolve=True)
    values.update(vocab_size=vocab_size, pad_token_id=pad_id)
    config = load_model_config(values)
    if config.max_seq_len < seq_len:
        raise ConfigError(f"train.seq_len: got {seq_len}, expected <= model.max_seq_len={config.max_seq_len}")
    return config.to_dict()


def trainer_kwargs(cfg: Any) -> dict[str, Any]:
    kwargs = OmegaConf.to_container(cfg.trainer, resolve=True)
    kwargs.pop("name", None)
    if not isinstance(kwargs.get("max_steps"), int) or kwargs["max_steps"] < 1:
        raise ConfigError(f"trainer.max_steps: got {kwargs.get('max_steps')!r}, expected an integer >= 1")
    return kwargs


def run(cfg: Any) -> StageResult:
    train, objective, optim = (
        train_config(cfg.train),
        objective_config(cfg.objective),
        optim_config(cfg.optim),
    )
    tokenizer_file, encoded_dir = tokenizer_paths(cfg)
    tokenizer = load_tokenizer(tokenizer_file)
    specials, vocab_size = special_token_ids(tokenizer), tokenizer.get_vocab_size()
    model = model_values(cfg, vocab_size, specials.pad, train.seq_len)
    if Family(model["family"]) is not FAMILY_OF[objective.kind]:
        raise ConfigError(
            f"model.family: got {model['family']} for objective.kind={objective.kind.value}, "
            f"expected {FAMILY_OF[objective.kind].value}"
        )
    kwargs = trainer_kwargs(cfg)
    L.seed_everything(cfg.seed, workers=True, verbose=False)

    datamodule = PretrainDataModule(str(encoded_dir), objective, train, specials, vocab_size, seed=cfg.seed)
    module = PretrainModule(model, _plain(objective), _plain(optim), max_steps=kwargs["max_steps"])
    curves = CurveWriter(train.reports_dir, every_n_steps=kwargs.get("log_every_n_steps", 10))
    checkpoint = ModelCheckpoint(
        dirpath=train.out_dir,
        filename="best",
        monitor="val/loss",
        mode="min",
        save_top_k=1,
        save_last=True,
        enable_version_counter=False,
        auto_insert_metric_name=False,
    )
    loggers = []
    if (tracking := active_run()) is not None:
        from lightning.pytorch.loggers import MLFlowLogger

        run_id, uri = tracking
        loggers.append(MLFlowLogger(tracking_uri=uri, run_id=run_id, log_model=False))
    callbacks = [checkpoint, curves] + ([LearningRateMonitor("step")] if loggers else [])
    trainer = L.Trainer(
        logger=loggers or False,
        callbacks=callbacks,
        default_root_dir=train.out_dir,
        **kwargs,
    )
    last = Path(train.out_dir) / "last.ckpt"
    resume_from = str(last) if train.resume and last.is_file() else None
    start = time.perf_counter()
    trainer.fit(module, datamodule=datamodule, ckpt_path=resume_from, weights_only=False)
    wall = time.perf_counter() - start

    params = count_parameters(module.model)
    metrics = {
        "best_val_loss": float(checkpoint.best_model_score)
        if checkpoint.best_model_score is not None
        else float("nan"),
        "steps": trainer.global_step,
        "tokens_seen": curves.tokens,
        "tokens_per_second": curves.tokens_per_second,
        "wall_seconds": wall,
        "params_total": params["total"],
        "params_non_embedding": params["non_embedding"],
    }
    reports = Path(train.reports_dir)
    if trainer.is_global_zero:
        write_json(reports / "metrics.json", metrics)
    artifacts = [
        str(Path(train.out_dir) / "best.ckpt"),
        str(tokenizer_file),
        str(reports / "metrics.json"),
        str(reports / "train_loss.csv"),
        str(reports / "val_loss.csv"),
    ]
    return StageResult(metrics, artifacts)


def _plain(config: Any) -> dict[str, Any]:
    """A validated dataclass back to plain values (Enums as strings) for save_hyperparameters."""
    return {k: (v.value if hasattr(v, "value") else v) for k, v in dataclasses.asdict(config).items()}
