"""The `pretrain` stage: a tokenizer's encoded splits + model/objective/optim/trainer configs -> checkpoints.

Outputs: {train.out_dir}/best.ckpt (weights + hyperparameters), last.ckpt (resume state) and
step<N>.ckpt (weights at the `train.keep_at` shares of the steps), see `lmforge.training.checkpoints`; {train.reports_dir}/{train_loss,val_loss}.csv (curves for `dvc
plots`) and {train.reports_dir}/metrics.json (for `dvc metrics show`).

Resume (`train.resume`): a continued run replays nothing and skips nothing. The checkpoint brings
back the step, optimizer, data position within the epoch, RNG and curves, and every random draw of
the data is keyed by (seed, draw, example), so a run killed at any point and continued ends with the
same curves and metrics as one that was never interrupted. `{out_dir}/fingerprint.txt` records the
config, data and code a run started from; `resume=auto` continues only a run with the same one, and
`resume=true` refuses a run of another config, so a folder's outputs always describe its config.

Extend (`train.extend_from=<another run's out_dir>`, with a new `run_name`): more steps of a finished
run are a new run that starts from the old one's last.ckpt (and keeps its best.ckpt until a better
one is found), follows its own config's schedule from the step reached, and writes only its own
folders; the old run's outputs, its DVC stage and its MLflow run stay as they were.

Nothing in the output folder is deleted or rewritten until everything the run needs (config, data,
checkpoint to continue, model, Lightning Trainer) has been built without error.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

import lightning as L

from lmforge.codebase import module_code
from lmforge.data.encoded import EncodedSplit
from lmforge.errors import ConfigError, DataError
from lmforge.io import atomic_path, sha256_files, write_json, write_text
from lmforge.model import count_parameters
from lmforge.model.config import ModelConfig, model_config
from lmforge.stage import DataInput, Plan, StageResult, TrainedModel, read, run_name_value, seed_value
from lmforge.structured import plain
from lmforge.timings import timings_path
from lmforge.tokenizer.config import TokenizerConfig, tokenizer_config, tokenizer_path
from lmforge.tokenizer.specials import SpecialTokens, load_tokenizer, special_token_ids
from lmforge.tracking import active_run, flatten
from lmforge.training.callbacks import CurveWriter, RandomState
from lmforge.training.checkpoints import Checkpoints, check_weights, read_checkpoint
from lmforge.training.config import (
    ObjectiveConfig,
    OptimConfig,
    TrainConfig,
    TrainerConfig,
    check_schedule_length,
    objective_config,
    optim_config,
    train_config,
    trainer_config,
)
from lmforge.training.datamodule import PretrainDataModule
from lmforge.training.module import PretrainModule
from lmforge.training.objectives import OBJECTIVES
from lmforge.training.trainer import build_trainer

RESUME_STATE = ("state_dict", "hyper_parameters", "optimizer_states", "loops", "callbacks")


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class TrainingPlan(Plan):
    """What every stage that trains a language model on the encoded corpus reads (`prepare_run`)."""

    tokenizer: TokenizerConfig = read(tokenizer_config)
    objective: ObjectiveConfig = read(objective_config)
    optim: OptimConfig = read(optim_config)
    trainer: TrainerConfig = read(trainer_config)
    train: TrainConfig = read(train_config)
    seed: int = read(seed_value)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class PretrainPlan(TrainingPlan):
    """The `pretrain` stage's plan: a model group to train, in its own run folder."""

    model: ModelConfig = read(model_config)
    run_name: str = read(run_name_value)


def schedule_fits_run(plan: TrainingPlan) -> None:
    """A stage check on the validated plan: the `optim` schedule fits a run of `trainer.max_steps` steps."""
    check_schedule_length(plan.optim, "optim", plan.trainer.max_steps, "trainer.max_steps")


def tokenizer_paths(tok: TokenizerConfig) -> tuple[Path, Path]:
    """(tokenizer.json, encoded folder) of the configured tokenizer."""
    return tokenizer_path(tok.dir, tok.name), Path(tok.encoded_dir) / tok.name


def model_for(model: ModelConfig, vocab_size: int, pad_id: int, seq_len: int) -> ModelConfig:
    """The model group with what the data decides: vocabulary size and padding id."""
    config = dataclasses.replace(model, vocab_size=vocab_size, pad_token_id=pad_id)
    if config.max_seq_len < seq_len:
        raise ConfigError(f"train.seq_len: got {seq_len}, expected <= model.max_seq_len={config.max_seq_len}")
    return config


@functools.lru_cache(maxsize=4)
def fingerprint(plan: TrainingPlan, tokenizer_file: Path, encoded_dir: Path, *inputs: Path) -> str:
    """sha256 of what a run's result depends on: its config (but `train.resume`), data, code and any
    other `inputs` (a distillation's teacher checkpoint, the last.ckpt a run extends). The code is
    what the plan's stage module imports (`lmforge.codebase`, the files its DVC stage depends on), so
    an edit elsewhere in the package changes neither the stamp nor the folder it sits in. Kept per
    plan (a plan is immutable and lives for one run): the door's `will_resume` and the run share one
    hash."""
    if not encoded_dir.is_dir():
        raise DataError(f"encoded folder {encoded_dir} does not exist; run the encode stage first")
    values = {**plan.values, "train": {k: v for k, v in plan.values["train"].items() if k != "resume"}}
    code = module_code(type(plan).__module__)
    extends = [extended_checkpoint(plan.train.extend_from)] if plan.train.extend_from else []
    files = [
        tokenizer_file,
        *sorted(p for p in encoded_dir.iterdir() if p.is_file()),
        *code,
        *extends,
        *inputs,
    ]
    return sha256_files(files) + ":" + json.dumps(values, sort_keys=True)


def extended_checkpoint(folder: str) -> Path:
    """The last.ckpt of the run that `train.extend_from` names, or one line saying it has none."""
    last = Path(folder) / "last.ckpt"
    if not last.is_file():
        raise DataError(f"train.extend_from: {last} does not exist; expected the folder of a run to extend")
    return last


class Start(NamedTuple):
    """Where a run starts: `checkpoint` to continue (None: step 0); `fresh`: it claims its folder."""

    checkpoint: Path | None
    fresh: bool


def resume_from(train: TrainConfig, out_dir: Path, stamp_text: str) -> Start:
    """Continue this folder's run, extend another's, or start afresh (see the module docstring)."""
    last, stamp = out_dir / "last.ckpt", out_dir / "fingerprint.txt"
    recorded = stamp.read_text() if stamp.is_file() else None
    if train.resume is True:
        if not last.is_file():
            raise DataError(f"train.resume=true but {last} does not exist; expected a run to continue")
        if recorded is not None and (changed := changed_keys(recorded, stamp_text)):
            raise ConfigError(
                f"train.resume=true: {out_dir} was run with other values of {', '.join(changed)}; expected its "
                "own config (for more steps, extend it: a new run_name with train.extend_from="
                f"{out_dir})"
            )
        return Start(last, fresh=False)
    if train.resume == "auto" and last.is_file() and recorded == stamp_text:
        return Start(last, fresh=False)
    source = extended_checkpoint(train.extend_from) if train.extend_from else None
    return Start(source, fresh=True)


def changed_keys(recorded: str, stamp_text: str) -> list[str]:
    """The dotted config keys whose values differ between two fingerprints (their data/code hash aside)."""
    before, after = (flatten(json.loads(text.partition(":")[2] or "{}")) for text in (recorded, stamp_text))
    return sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))


def folders(plan: PretrainPlan) -> list[str]:
    """The output folder a pretrain run writes alone (locked by `execute` before anything starts)."""
    return [plan.train.out_dir]


def extends(plan: TrainingPlan) -> str | None:
    """The output folder of the run this one extends (`train.extend_from`), if any: MLflow links them."""
    return plan.train.extend_from


def will_resume(plan: PretrainPlan) -> bool:
    """Whether `run(plan)` continues this folder's run (MLflow then continues its run too); a refused
    resume (`train.resume=true` over another config) raises here, at the door."""
    try:
        stamp_text = fingerprint(plan, *tokenizer_paths(plan.tokenizer))
    except (DataError, OSError):
        return False  # run() reports the problem
    return not resume_from(plan.train, Path(plan.train.out_dir), stamp_text).fresh


def run(plan: PretrainPlan) -> StageResult:
    job = prepare_run(plan, plan.model)

    def build() -> PretrainModule:
        return PretrainModule(job.model, job.objective, job.optim, job.trainer.max_steps)

    return fit(job, fingerprint(plan, *tokenizer_paths(plan.tokenizer)), build)


def prepare_run(
    plan: TrainingPlan,
    model: ModelConfig,
    objective: ObjectiveConfig | None = None,
    train: TrainConfig | None = None,
    *,
    built: bool = False,
) -> Run:
    """Check what a run needs, before anything is written. `model` is a model group, completed by the
    tokenizer (vocabulary size, padding id), or, `built`, a model already made for it (distillation's
    student), checked against it; `objective` and `train` replace the plan's groups (distillation: its
    teacher's objective, its own output folders)."""
    train, optim, trainer_cfg = train or plan.train, plan.optim, plan.trainer
    objective = objective or plan.objective
    tokenizer_file, encoded_dir = tokenizer_paths(plan.tokenizer)
    tokenizer = load_tokenizer(tokenizer_file)
    specials, vocab_size = special_token_ids(tokenizer), tokenizer.get_vocab_size()
    if not built:
        model = model_for(model, vocab_size, specials.pad, train.seq_len)
    else:
        check_tokenizer(model, vocab_size, specials.pad, tokenizer_file)
        if model.max_seq_len < train.seq_len:
            raise ConfigError(f"train.seq_len: got {train.seq_len}, expected <= {model.max_seq_len}")
    family = OBJECTIVES[objective.kind].family
    if model.family is not family:
        raise ConfigError(
            f"model.family: got {model.family.value} for objective.kind={objective.kind.value}, "
            f"expected {family.value}"
        )
    for split in ("train", "val"):  # a missing or corrupt array fails here, in one line, before training
        EncodedSplit(encoded_dir, split)
    return Run(
        plan.seed,
        train,
        objective,
        optim,
        trainer_cfg,
        model,
        specials,
        vocab_size,
        encoded_dir,
        tokenizer_file,
    )


def check_tokenizer(model: ModelConfig, vocab_size: int, pad_id: int, tokenizer_file: Path) -> None:
    """One line when a given model was not trained with this tokenizer (its vocabulary or padding)."""
    if (model.vocab_size, model.pad_token_id) != (vocab_size, pad_id):
        raise ConfigError(
            f"tokenizer: got {tokenizer_file} (vocab_size={vocab_size}, pad id {pad_id}), expected the "
            f"model's tokenizer (vocab_size={model.vocab_size}, pad id {model.pad_token_id})"
        )


def fit(job: Run, stamp_text: str, build: Callable[[], PretrainModule]) -> StageResult:
    """Train `build()` as `job` says: afresh, continued from its last.ckpt (`train.resume`) or from
    another run's (`train.extend_from`). The caller (`lmforge.tracking.execute`) holds the folder's lock."""
    return _fit(job, resume_from(job.train, Path(job.train.out_dir), stamp_text), stamp_text, build)


class Run(NamedTuple):
    """What `prepare_run` checked and decided, handed to `_fit`."""

    seed: int
    train: TrainConfig
    objective: ObjectiveConfig
    optim: OptimConfig
    trainer: TrainerConfig
    model: ModelConfig  # the model group with the tokenizer's vocab size and pad id
    specials: SpecialTokens
    vocab_size: int
    encoded_dir: Path
    tokenizer_file: Path


def _fit(job: Run, start: Start, stamp_text: str, build: Callable[[], PretrainModule]) -> StageResult:
    train, trainer_cfg, checkpoint = job.train, job.trainer, start.checkpoint
    L.seed_everything(job.seed, workers=True, verbose=False)
    datamodule = PretrainDataModule(
        str(job.encoded_dir), job.objective, train, job.specials, job.vocab_size, seed=job.seed
    )
    module = build()  # after seeding: its initial weights follow the seed
    if train.compile:
        module.model.compile()  # in place: checkpoints keep the plain model's parameter names
    if checkpoint is not None:  # refuse a foreign, malicious or mismatched file before Lightning reads it
        check_weights(module, read_checkpoint(checkpoint, needs=RESUME_STATE), checkpoint)
    curves = CurveWriter(
        train.reports_dir,
        every_n_steps=trainer_cfg.log_every_n_steps,
        timings=timings_path(train.reports_dir),
    )
    keep = kept_steps(train.keep_at, trainer_cfg.max_steps)
    checkpoints = Checkpoints(train.out_dir, every_n_steps=train.checkpoint_every, keep_steps=keep)
    trainer = build_trainer(
        trainer_cfg,
        mlflow_run=active_run(),
        log_lr=True,
        metric_names=metric_names(job.objective),
        callbacks=[curves, RandomState(), checkpoints],
        default_root_dir=train.out_dir,
        enable_checkpointing=True,
        use_distributed_sampler=False,  # our VisitSampler shards by rank and resumes mid-epoch
    )
    if start.fresh and trainer.is_global_zero:  # everything is built: only now may the folder change
        claim(Path(train.out_dir), stamp_text, checkpoint)
    trainer.fit(
        module, datamodule=datamodule, ckpt_path=str(checkpoint) if checkpoint else None, weights_only=True
    )

    params = count_parameters(module.model)
    metrics = {
        "best_val_loss": checkpoints.best_score if checkpoints.best_score is not None else float("nan"),
        "best_val_step": checkpoints.best_step if checkpoints.best_step is not None else -1,
        "steps": trainer.global_step,
        "tokens_seen": curves.tokens,
        "params_total": params["total"],
        "params_non_embedding": params["non_embedding"],
    }
    reports = Path(train.reports_dir)
    if trainer.is_global_zero:
        write_json(
            reports / "metrics.json", metrics
        )  # no clock: its consumers read only what the inputs decide
    artifacts = [str(reports / name) for name in ("metrics.json", "train_loss.csv", "val_loss.csv")]
    best = Path(train.out_dir) / "best.ckpt"
    return StageResult(
        {**metrics, **curves.clock_metrics()},  # MLflow gets the clock too
        artifacts,
        # what ran where the config says otherwise: the tokenizer decides the vocabulary and padding,
        # a distilled student trains on its teacher's objective
        params={"model": job.model.to_dict(), "objective": plain(job.objective)},
        model=TrainedModel(str(best), str(job.tokenizer_file), job.model.family.value)
        if best.is_file()
        else None,
        inputs=encoded_inputs(job.encoded_dir),
    )


def metric_names(objective: ObjectiveConfig) -> dict[str, str | None]:
    """MLflow names that say what each logged number measures: `train/mlm_loss` is the masked-token
    loss, `train/total_loss` the optimised sum (with NSP's), `val/mlm_loss` the same measure as
    `train/mlm_loss` on the validation split."""
    kind = objective.kind.value
    names: dict[str, str | None] = {
        "train/nll": f"train/{kind}_loss",
        "train/loss": None,
        "val/loss": f"val/{kind}_loss",
    }
    if objective.nsp:
        names["train/loss"] = "train/total_loss"
    for split in ("train", "val"):
        names[f"{split}/accuracy"] = f"{split}/{kind}_accuracy"
    names["val/perplexity"] = f"val/{kind}_perplexity"
    names["val/content_accuracy"] = f"val/{kind}_content_accuracy"
    return names


def encoded_inputs(encoded_dir: Path) -> dict[str, DataInput]:
    """The encoded splits a pretraining run reads, for MLflow's run inputs."""
    out = {}
    for split in ("train", "val", "test"):
        data = EncodedSplit(encoded_dir, split)
        out[split] = DataInput(str(encoded_dir), data.files, data.n_documents)
    return out


def kept_steps(shares: Iterable[float], max_steps: int) -> list[int]:
    """The optimizer steps of `train.keep_at`: each share of max_steps, rounded, at least step 1."""
    return sorted({max(1, round(share * max_steps)) for share in shares})


def claim(out_dir: Path, stamp_text: str, extends: Path | None) -> None:
    """A fresh run owns its folder: nothing of an earlier run survives. An extension starts with the
    best.ckpt of the run it extends, which the restored best score refers to."""
    for name in ("best.ckpt", "last.ckpt"):
        (out_dir / name).unlink(missing_ok=True)
    for kept in out_dir.glob("step*.ckpt"):
        kept.unlink()
    if extends is not None and (best := extends.parent / "best.ckpt").is_file():
        with atomic_path(out_dir / "best.ckpt") as tmp:
            shutil.copyfile(best, tmp)
    write_text(out_dir / "fingerprint.txt", stamp_text)
