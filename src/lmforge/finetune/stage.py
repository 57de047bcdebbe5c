"""The `finetune` stage: one task x one starting point x one adaptation, for one or more seeds.

    data/tasks/<task>/{train,val,test}.jsonl  (the task stage)
    + a starting point (`lmforge.finetune.starts`: our pretraining, scratch, or a Hugging Face folder)
    -> {finetune.out_dir}/seed<k>/best.ckpt    merged weights + hyperparameters, weights_only-loadable
       {finetune.out_dir}/tokenizer.json       the backbone's tokenizer, beside the row's models
       {finetune.reports_dir}/metrics.json     test metrics (mean and std over seeds), baselines on the
                                               same test examples, parameter counts, steps
       {finetune.reports_dir}/run.json         what the row is: task, model, init, adaptation, sizes
       {finetune.curve}                        seed, step, validation loss and metrics (dvc plots)
       reports/timings/... (`lmforge.timings`)  training seconds per seed and latency (batch size 1):
                                               measured, not decided by the inputs, so no stage reads it

Training validates every `val_every` steps on a fixed sample of the val split, keeps the weights of
the best value of the task's first metric and stops after `patience` validations without
improvement (or at `max_steps`). The best weights (LoRA merged in) are written to best.ckpt, read
back with `weights_only=True` into a freshly built module, and that module is evaluated once on the
test sample: the reported score is the exported model's. Train, val and test samples depend on the
task's seed only, so every row of a task is scored on the same examples, and so are its baselines
(which learn from the same training examples as the rows).

The row's MLflow run logs one model (`lmforge.finetune.predict` behind `lmforge.serving`): the seed
with the best validation score, the one a user would ship. The registry keeps a model per task,
`lmforge-finetune-<task>`: every row registers its model as `@candidate`, and `@champion` goes to the
row with the best mean test score over its seeds (`pipelines/finetune.py`: `score`, `registers`).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping
from torch.utils.data import DataLoader, DistributedSampler

from lmforge.backbones import Backbone, Where, load_backbone
from lmforge.errors import DataError
from lmforge.finetune.adapt import AdaptConfig, add_lora, freeze, merge, trainable_parameters
from lmforge.finetune.config import FinetuneConfig, adapt_config, finetune_config
from lmforge.finetune.examples import Collator, encode
from lmforge.finetune.module import FinetuneModule, evaluate
from lmforge.finetune.predict import example
from lmforge.finetune.tasks import TASKS, metric_names, score
from lmforge.io import atomic_path, write_json
from lmforge.model import count_parameters
from lmforge.stage import DataInput, Plan, StageResult, TrainedModel, read, run_name_value
from lmforge.tasks.config import TaskConfig, task_config
from lmforge.tasks.splits import rank
from lmforge.timings import write_timings
from lmforge.tokenizer.specials import special_token_ids
from lmforge.tracking import close_child, open_child
from lmforge.training.checkpoints import check_weights, read_checkpoint, save_file
from lmforge.training.config import TrainerConfig, trainer_config
from lmforge.training.trainer import build_trainer

SPLITS = ("train", "val", "test")
# the `trainer` keys fine-tuning's own loop decides (early stopping within finetune.max_steps)
LOOP = {"trainer.max_steps": "finetune.max_steps", "trainer.val_check_interval": "finetune.val_every"}


def read_split(task: TaskConfig, split: str) -> list[dict[str, Any]]:
    path = Path(task.out_dir) / f"{split}.jsonl"
    if not path.is_file():
        raise DataError(
            f"task {task.name}: {path} does not exist; run the task stage (task@{task.name}) first"
        )
    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    if not records:
        raise DataError(
            f"task {task.name}: the {split} split ({path}) is empty; expected at least one example"
        )
    return records


def sample(records: list[dict[str, Any]], n: int | None, seed: int) -> list[dict[str, Any]]:
    """A fixed subset of `n` records (all when n is None or larger), ranked by id as splits rank groups."""
    if n is None or n >= len(records):
        return records
    return sorted(records, key=lambda r: rank(str(r["id"]), seed))[:n]


def label_word_ids(labels: list[str] | None, tokenizer, eos: int) -> list[list[int]] | None:
    """Each label written as words, in the model's tokens, ending with EOS (text-to-text targets)."""
    if not labels:
        return None
    return [
        tokenizer.encode(label.replace("_", " "), add_special_tokens=False).ids + [eos] for label in labels
    ]


def start(ft: FinetuneConfig) -> Backbone:
    """The backbone `finetune.init` names (`lmforge.backbones`), with `finetune.dropout` applied."""
    where = Where(
        ft.init,
        ft.models_dir,
        ft.backbone,
        ft.tokenizer_dir,
        ft.tokenizer,
        ft.hf_cache,
        "finetune.checkpoint" if ft.checkpoint != "best" else "finetune.init",
        ft.checkpoint,
    )
    begin = load_backbone(where)
    if begin.tokenizer is None:
        raise DataError(
            f"finetune.init={ft.init}: {begin.source} has no tokenizer.json; expected one beside it"
        )
    if ft.dropout is None:
        return begin
    rates = dict.fromkeys(("dropout", "embedding_dropout", "attention_dropout"), ft.dropout)
    return replace(begin, config=replace(begin.config, **rates))


def adaptation(cfg: AdaptConfig) -> str:
    if cfg.lora:
        return f"lora r={cfg.lora_rank}"
    if cfg.freeze.value == "none":
        return "full"
    return f"frozen {cfg.freeze.value}" + (f" {cfg.freeze_layers}" if cfg.freeze_layers else "")


class BestWeights(L.Callback):
    """Keeps a copy of the weights at the best validation value of `monitor` (higher is better), and
    every validation's values for the curve."""

    def __init__(self, monitor: str) -> None:
        self.monitor = monitor
        self.best: float | None = None
        self.step = 0
        self.state: dict[str, torch.Tensor] | None = None
        self.curve: list[dict[str, float]] = []

    def on_validation_end(self, trainer, module) -> None:
        if trainer.sanity_checking:
            return
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        self.curve.append({"step": trainer.global_step, **metrics})
        value = metrics[self.monitor]
        if self.best is None or value > self.best:
            self.best, self.step = value, trainer.global_step
            self.state = {k: v.detach().clone() for k, v in module.state_dict().items()}


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class FinetunePlan(Plan):
    """The `finetune` stage's plan: `trainer` gives the hardware, strategy, precision and clipping;
    the loop is finetune's."""

    task: TaskConfig = read(task_config)
    finetune: FinetuneConfig = read(finetune_config)
    adapt: AdaptConfig = read(adapt_config)
    trainer: TrainerConfig = read(trainer_config)
    run_name: str = read(run_name_value)


def run(plan: FinetunePlan) -> StageResult:
    task, ft, adapt = plan.task, plan.finetune, plan.adapt
    records = {split: read_split(task, split) for split in SPLITS}
    records["train"] = sample(records["train"], ft.train_examples, task.seed)
    records["val"] = sample(records["val"], ft.val_examples, task.seed)
    records["test"] = sample(records["test"], ft.test_examples, task.seed)
    begin = start(ft)
    specials = special_token_ids(begin.tokenizer)
    max_len = min(task.max_len, begin.config.max_seq_len)  # longer inputs are cut (task.truncation)
    labels = list(task.labels or ())
    encoded = {
        split: encode(
            task.kind.value,
            records[split],
            begin.tokenizer,
            labels,
            max_len,
            train=split == "train",
            truncation=task.truncation,
        )
        for split in SPLITS
    }
    if not encoded["train"].features:
        raise DataError(f"task {task.name}: no training example fits in {max_len} tokens; expected some")
    collate = Collator(pad_id=specials.pad)
    loaders = {
        split: DataLoader(encoded[split].features, batch_size=ft.eval_batch_size, collate_fn=collate)
        for split in ("val", "test")
    }
    module_args = dict(
        model=begin.config,
        task=task,
        optim=ft.run_optim(),
        max_steps=ft.max_steps,
        head_dropout=ft.head_dropout,
        label_ids=label_word_ids(labels, begin.tokenizer, specials.eos),
        pad_id=specials.pad,
    )

    runs = [
        _fit(plan, begin, module_args, encoded["train"].features, collate, loaders, seed) for seed in ft.seeds
    ]
    if not runs[0]["global_zero"]:  # another DDP process: rank zero writes the reports
        return StageResult({}, [])
    test = {name: [r["test"][name] for r in runs] for name in metric_names(task)}
    baselines = TASKS[task.kind].baselines(records["train"], records["test"], labels, task.seed)
    first = runs[0]

    metrics: dict[str, float] = {}
    for name, values in test.items():
        metrics[f"test_{name}"] = statistics.fmean(values)
        metrics[f"test_{name}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
    metrics["test/score"] = metrics[
        f"test_{metric_names(task)[0]}"
    ]  # every task's headline, one key for charts
    for baseline, (predicted, gold) in baselines.items():
        for name, value in score(task, predicted, gold).items():
            metrics[f"baseline_{baseline}_{name}"] = value
    metrics.update(
        {
            f"val_{metric_names(task)[0]}": statistics.fmean(r["best_val"] for r in runs),
            "params_total": first["params_total"],
            "params_trainable": first["params_trainable"],
            "steps": statistics.fmean(r["steps"] for r in runs),
            "best_step": statistics.fmean(r["best_step"] for r in runs),
        }
    )
    clock = {  # lmforge.timings: the row's timings file and MLflow, never what a summary reads
        "train_seconds": statistics.fmean(r["train_seconds"] for r in runs),
        "latency_ms": first["latency_ms"],
    }
    description = {
        "task": task.name,
        "kind": task.kind.value,
        "model": begin.name,
        "family": begin.config.family.value,
        "init": ft.init if ft.init != "pretrained" else f"pretrained ({ft.backbone})",
        "checkpoint": ft.checkpoint if ft.init == "pretrained" else None,  # its pretraining compute
        "source": begin.source,
        "adapt": adaptation(adapt),
        "metrics": metric_names(task),
        "seeds": list(ft.seeds),
        "test_per_seed": test,
        "max_len": max_len,
        "examples": {split: len(encoded[split].features) for split in SPLITS},
        "truncated": {split: encoded[split].truncated for split in SPLITS},  # inputs cut to max_len
        "truncation": task.truncation,
        "train_dropped": encoded["train"].dropped,
    }
    reports = Path(ft.reports_dir)
    write_json(reports / "metrics.json", metrics)
    write_json(reports / "run.json", description)
    write_timings(
        reports, {**clock, "train_seconds_per_seed": {str(r["seed"]): r["train_seconds"] for r in runs}}
    )
    _write_curve(Path(ft.curve), [dict(seed=r["seed"], **row) for r in runs for row in r["curve"]])
    artifacts = [str(reports / name) for name in ("metrics.json", "run.json")] + [ft.curve]
    inputs = {
        split: DataInput(task.out_dir, (str(Path(task.out_dir) / f"{split}.jsonl"),), len(records[split]))
        for split in SPLITS
    }
    chosen = max(runs, key=lambda r: r["best_val"])  # the first seed among equals
    tokenizer = Path(ft.out_dir) / "tokenizer.json"
    with atomic_path(tokenizer) as tmp:
        begin.tokenizer.save(str(tmp))
    model = TrainedModel(
        str(Path(ft.out_dir) / f"seed{chosen['seed']}" / "best.ckpt"),
        str(tokenizer),
        begin.config.family.value,
        example(task.kind, records["test"][0]),
    )
    return StageResult({**metrics, **clock}, artifacts, model=model, inputs=inputs)


def starts_from(plan: FinetunePlan) -> str | None:
    """The output folder of the model a row starts from (MLflow links the row to the run that wrote it):
    our pretraining's or a student's; `hf:<name>` for a Hugging Face model; None from scratch."""
    ft = plan.finetune
    if ft.init == "pretrained":
        return f"{ft.models_dir}/{ft.backbone}"
    return ft.init if ft.hf_source is not None else None


def _fit(
    plan: FinetunePlan,
    begin: Backbone,
    module_args: dict[str, Any],
    train_features: list,
    collate: Collator,
    loaders: dict[str, DataLoader],
    seed: int,
) -> dict[str, Any]:
    """Fine-tune one seed. Under DDP each process trains on its shard of the training examples and
    validates on the whole fixed val sample, so early stopping and the kept weights agree across
    processes; rank zero exports and scores them."""
    ft, adapt = plan.finetune, plan.adapt
    L.seed_everything(seed, workers=True, verbose=False)
    module = FinetuneModule(**module_args)
    if begin.model is not None:
        check_weights(module.backbone, {"state_dict": begin.model.state_dict()}, begin.source)
    freeze(module.backbone, adapt)
    if adapt.lora:
        module.backbone = add_lora(module.backbone, adapt)
    trainable = trainable_parameters(module)
    best = BestWeights(module.monitor)
    child = open_child(f"seed {seed}", {"seed": str(seed)})  # each seed's curves in a run of its own
    trainer = build_trainer(
        plan.trainer,
        mlflow_run=child,
        callbacks=[EarlyStopping(module.monitor, mode="max", patience=ft.patience), best],
        max_steps=ft.max_steps,  # fine-tuning's own loop: its length and validation interval
        val_check_interval=ft.val_every,
        enable_checkpointing=False,  # BestWeights keeps the best weights; best.ckpt is written below
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=ft.out_dir,
        use_distributed_sampler=False,  # the train shards are made below; val and test stay whole
    )
    if trainer.world_size > 1:
        sampler = DistributedSampler(
            train_features, trainer.world_size, trainer.global_rank, shuffle=True, seed=seed
        )
        train = DataLoader(train_features, ft.batch_size, sampler=sampler, collate_fn=collate)
    else:
        generator = torch.Generator().manual_seed(seed)
        train = DataLoader(
            train_features, ft.batch_size, shuffle=True, generator=generator, collate_fn=collate
        )
    began = time.perf_counter()
    try:
        trainer.fit(module, train, loaders["val"])
    except BaseException:
        close_child(child, {}, status="FAILED")
        raise
    train_seconds = time.perf_counter() - began
    if best.state is None:  # fewer steps than one validation interval: validate the end state
        trainer.validate(module, loaders["val"], verbose=False)  # BestWeights records it

    if not trainer.is_global_zero:
        return {"global_zero": False}
    module.load_state_dict(best.state)
    if adapt.lora:
        module.backbone = merge(module.backbone)
    path = Path(ft.out_dir) / f"seed{seed}" / "best.ckpt"
    save_file(path, {"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams)})
    exported = _load(path)
    test = evaluate(exported, loaders["test"])
    headline = metric_names(plan.task)[0]
    close_child(child, {**{f"test_{k}": v for k, v in test.items()}, "test/score": test[headline]})
    return {
        "global_zero": True,
        "seed": seed,
        "test": test,
        "best_val": best.best,
        "best_step": best.step,
        "steps": trainer.global_step,
        "curve": best.curve,
        "train_seconds": train_seconds,
        "params_total": count_parameters(exported)["total"],
        "params_trainable": trainable,
        "latency_ms": _latency_ms(
            exported, loaders["test"].dataset, ft.latency_examples, loaders["test"].collate_fn
        ),
    }


def _load(path: Path) -> FinetuneModule:
    """The exported model, rebuilt from the checkpoint's plain hyperparameters (weights_only=True)."""
    checkpoint = read_checkpoint(path)
    module = FinetuneModule.from_hparams(checkpoint["hyper_parameters"])
    check_weights(module, checkpoint, path)
    return module.eval()


@torch.no_grad()
def _latency_ms(module: FinetuneModule, features: list, n: int, collate) -> float:
    """Median milliseconds of one example's forward pass (batch size 1), after 4 warm-up calls."""
    module.eval()
    batches = [collate([f]) for f in features[: n + 4]]
    for batch in batches[:4]:
        module(batch)
    times = []
    for batch in batches[4:] or batches:
        began = time.perf_counter()
        module(batch)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def _write_curve(path: Path, rows: list[dict[str, Any]]) -> None:
    columns = sorted({k for row in rows for k in row}, key=lambda k: (k not in ("seed", "step"), k))
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)
