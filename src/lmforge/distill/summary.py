"""The `distill_summary` stage: each teacher beside its distilled student and the control.

For every family: parameters, the pretraining objective's loss on the whole test split (the batches the evaluate
stage scores, the same for all three), and the first metric of every fine-tuning task the student
was fine-tuned on (mean over the seeds the three rows share).

Then the comparisons, each paired by seed with its 95% interval and verdict (`lmforge.stats.paired`;
one shared seed: no interval, said so), in the order a reader needs them:
1. teacher - scratch: the same architecture fine-tuned from random weights (the fine-tuning table's
   `<scratch prefix>-<task>` row). Unless pretraining helps the teacher, retention measures nothing.
2. retention = student / teacher (and control / teacher), the mean of per-seed ratios.
3. student - control: what distillation adds over training the small model on the same tokens.
A conclusion per family and task follows from those verdicts alone. Writes {out_dir}/summary.json
(for `dvc metrics show` and MLflow) and {out_dir}/summary.md.

And CPU inference latency (a full-length forward at each batch size, median of repeated calls after
warm-up, the three models interleaved so a drift of the host hits them alike): a clock reading, so
it goes to MLflow and to the summary's timings file (`reports/timings/distill/summary.json`,
`lmforge.timings`), which no stage reads, not into summary.json or summary.md.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from lmforge.errors import ConfigError, DataError
from lmforge.evaluation.evaluate import test_metrics
from lmforge.io import write_json, write_text
from lmforge.model import count_parameters
from lmforge.stage import Plan, StageResult, read, seed_value
from lmforge.stats import NOT_DISTINGUISHABLE, ONE_SEED, paired
from lmforge.structured import Group
from lmforge.timings import write_timings
from lmforge.tokenizer.config import tokenizer_path
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
from lmforge.training.checkpoints import load_module
from lmforge.training.config import TrainConfig, train_config
from lmforge.training.datamodule import PretrainDataModule

ROLES = ("teacher", "student", "control")


@dataclass(frozen=True)
class DistillSummaryConfig:
    # the families whose students this summary measures (a list: a preset replaces it whole), and the
    # tokenizer each family's checkpoints and encoded test split use
    families: list[str] = field(default_factory=lambda: ["encoder"])
    tokenizers: dict[str, str] = field(default_factory=lambda: {"encoder": "wordpiece", "decoder": "bpe"})
    models_dir: str = "artifacts/pretrain"
    student_dir: str = "artifacts/distill"
    tokenizer_dir: str = "artifacts/tokenizers"
    encoded_dir: str = "data/encoded"
    teacher_rows: str = "reports/finetune/rows"
    student_rows: str = "reports/distill/rows"
    runs_dir: str = "reports/distill/runs"
    out_dir: str = "reports/distill"
    # family -> prefix of its from-scratch fine-tuning rows (`<prefix>-<task>` under teacher_rows);
    # a family without one gets no teacher - scratch line, and its conclusions say so
    scratch_rows: dict[str, str] = field(default_factory=lambda: {"encoder": "scratch"})
    latency_batches: list[int] = field(default_factory=lambda: [1, 32])
    latency_repeats: int = 10

    def __post_init__(self) -> None:
        if not self.families:
            raise ConfigError(
                "distill_summary.families: got none, expected one family or more (encoder, decoder)"
            )
        unknown = [family for family in self.families if family not in self.tokenizers]
        if unknown:
            raise ConfigError(
                f"distill_summary.families: {unknown[0]!r} has no tokenizer, expected one of "
                f"{sorted(self.tokenizers)} (distill_summary.tokenizers)"
            )
        if not self.latency_batches or min(self.latency_batches) < 1:
            raise ConfigError(
                f"distill_summary.latency_batches: got {self.latency_batches}, expected batch sizes >= 1"
            )
        if self.latency_repeats < 1:
            raise ConfigError(
                f"distill_summary.latency_repeats: got {self.latency_repeats}, expected an integer >= 1"
            )


distill_summary_config = Group(DistillSummaryConfig, "distill_summary")


def checkpoints(cfg: DistillSummaryConfig, family: str) -> dict[str, Path]:
    student_dir = Path(cfg.student_dir)
    return {
        "teacher": Path(cfg.models_dir) / family / "best.ckpt",
        "student": student_dir / f"{family}-student" / "best.ckpt",
        "control": student_dir / f"{family}-control" / "best.ckpt",
    }


def read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"{what} {path}: unreadable ({err}); expected the JSON its stage writes") from None


def downstream(cfg: DistillSummaryConfig, family: str) -> dict[str, dict[str, Any]]:
    """task -> {metric, teacher, student, control[, scratch]}: the first test metric of each task the
    student was fine-tuned on, seed -> score, from the fine-tuning rows (the teacher's and the scratch
    row's from the main fine-tuning stage)."""
    rows = Path(cfg.student_rows)
    prefix = f"{family}-student-"
    tasks = sorted(p.name[len(prefix) :] for p in rows.glob(f"{prefix}*") if p.is_dir())
    scores = {}
    for task in tasks:
        folders = {
            "teacher": Path(cfg.teacher_rows) / f"{family}-{task}",
            "student": rows / f"{family}-student-{task}",
            "control": rows / f"{family}-control-{task}",
        }
        metric = read_json(folders["student"] / "run.json", "fine-tuning row")["metrics"][0]
        scores[task] = {"metric": metric}
        scratch_prefix = cfg.scratch_rows.get(family)
        scratch = Path(cfg.teacher_rows) / f"{scratch_prefix}-{task}"
        if scratch_prefix is not None and (scratch / "run.json").is_file():
            folders["scratch"] = scratch
        for role, folder in folders.items():
            run = read_json(folder / "run.json", "fine-tuning row")
            scores[task][role] = dict(zip(run["seeds"], run["test_per_seed"][metric]))
    return scores


@torch.inference_mode()
def latency_ms(models: dict[str, torch.nn.Module], batch: int, seq_len: int, vocab: int, repeats: int):
    """Median milliseconds of one forward pass of each model on a (batch, seq_len) input, the models
    timed in turn within each repeat."""
    ids = torch.randint(5, vocab, (batch, seq_len), generator=torch.Generator().manual_seed(0))
    times: dict[str, list[float]] = {name: [] for name in models}
    for i in range(repeats + 2):
        for name, model in models.items():
            start = time.perf_counter()
            model(ids)
            if i >= 2:  # two warm-up calls
                times[name].append(1e3 * (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in times.items()}


def measure(
    cfg: DistillSummaryConfig, family: str, train: Any, seed: int
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, float]]]:
    """Each role's size and test loss, and apart from them its latency in ms per batch size
    (`b<batch>`), which is a clock reading, not a function of the inputs (`lmforge.timings`)."""
    tokenizer_name = cfg.tokenizers[family]
    modules = {role: load_module(path) for role, path in checkpoints(cfg, family).items()}
    tokenizer = load_tokenizer(tokenizer_path(cfg.tokenizer_dir, tokenizer_name))
    teacher = modules["teacher"]
    data = PretrainDataModule(
        str(Path(cfg.encoded_dir) / tokenizer_name),
        teacher.objective_config,
        train,
        special_token_ids(tokenizer),
        teacher.model_config.vocab_size,
        seed=seed,
    )
    test = list(data.loader("test"))
    out: dict[str, dict[str, Any]] = {}
    for role, module in modules.items():
        scores = test_metrics(module, test)
        params = count_parameters(module.model)
        out[role] = {
            "layers": module.model_config.n_layers,
            "params": params["total"],
            "params_non_embedding": params["non_embedding"],
            "test_loss": scores["loss"],
            "test_perplexity": scores["perplexity"],
        }
    models = {role: module.model for role, module in modules.items()}
    latency: dict[str, dict[str, float]] = {role: {} for role in models}
    for batch in cfg.latency_batches:
        times = latency_ms(models, batch, train.seq_len, teacher.model_config.vocab_size, cfg.latency_repeats)
        for role, ms in times.items():
            latency[role][f"b{batch}"] = ms
    return out, latency


def summarise(cfg: DistillSummaryConfig, train: Any, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The summary (what the inputs decide) and each family's latencies by role (the timings)."""
    summary: dict[str, Any] = {}
    latencies: dict[str, Any] = {}
    for family in cfg.families:
        numbers, latencies[family] = measure(cfg, family, train, seed)
        tasks = downstream(cfg, family)
        for role in ROLES:
            numbers[role]["downstream"] = {task: _shared_mean(s, role) for task, s in tasks.items()}
        compared: dict[str, dict[str, Any]] = {
            "teacher_minus_scratch": {
                task: paired(s["teacher"], s["scratch"], ("teacher", "scratch")).to_dict()
                for task, s in tasks.items()
                if "scratch" in s
            }
        }
        for role in ("student", "control"):
            ratios = {
                task: paired(s[role], s["teacher"], (role, "teacher"), ratio=True)
                for task, s in tasks.items()
            }
            compared[f"{role}_retention"] = {task: r.to_dict() for task, r in ratios.items()}
            retention = {task: r.mean for task, r in ratios.items()}
            if retention:
                retention["mean"] = statistics.fmean(retention.values())
            numbers[role]["retention"] = retention
        compared["student_minus_control"] = {
            task: paired(s["student"], s["control"], ("student", "control")).to_dict()
            for task, s in tasks.items()
        }
        numbers["student"]["made"] = read_json(Path(cfg.runs_dir) / f"{family}-student" / "run.json", "run")
        conclusions = {task: conclusion(compared, task) for task in tasks}
        summary[family] = {"tasks": {t: s["metric"] for t, s in tasks.items()}, **numbers, **compared}
        summary[family]["conclusions"] = conclusions
    return summary, latencies


def conclusion(compared: dict[str, dict[str, Any]], task: str) -> str:
    """What the verdicts of one family's task support, in words: retention means something only when
    the teacher beats scratch; distillation helps only when the student beats the control."""
    gap = compared["teacher_minus_scratch"].get(task)
    versus = compared["student_minus_control"][task]
    if gap is None:
        first = (
            "no scratch row: the teacher's pretraining is not tested, so retention shows nothing on its own"
        )
    elif gap["verdict"] == "teacher higher":
        first = "the teacher beats scratch, so retention measures what the student keeps"
    else:
        first = f"the teacher is not shown to beat scratch ({gap['verdict']}), so retention measures nothing"
    second = {
        "student higher": "distillation beats training the student alone on the same tokens",
        "control higher": "training the student alone beats distillation",
        NOT_DISTINGUISHABLE: "distillation is not distinguishable from training the student alone",
        ONE_SEED: "student and control share one seed: no verdict on distillation",
    }[versus["verdict"]]
    return f"{first}; {second}."


def render(summary: dict[str, Any]) -> str:
    tasks = sorted({t for family in summary.values() for t in family["tasks"]})
    header = ["family", "model", "layers", "params", "test loss (ppl)"]
    header += [f"{t} (%)" for t in tasks] + ["retention (mean)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for family, entry in summary.items():
        for role in ROLES:
            m = entry[role]
            cells = [family, _label(role, m), str(m["layers"]), f"{m['params'] / 1e6:.2f}M"]
            cells.append(f"{m['test_loss']:.3f} ({m['test_perplexity']:.0f})")
            for task in tasks:
                if task not in m["downstream"]:
                    cells.append("–")
                    continue
                text = f"{entry['tasks'][task]} {100 * m['downstream'][task]:.1f}"
                if role != "teacher":
                    text += f" ({100 * m['retention'][task]:.0f}%)"
                cells.append(text)
            mean = m.get("retention", {}).get("mean")
            cells.append("100%" if role == "teacher" else f"{100 * mean:.1f}%" if mean is not None else "–")
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Compared, the task's first metric, paired by seed (95% Student-t interval):", ""]
    lines += [
        "| family | task | teacher - scratch (points) | student / teacher | control / teacher "
        "| student - control (points) | seeds | conclusion |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for family, entry in summary.items():
        for task in entry["tasks"]:
            gap = entry["teacher_minus_scratch"].get(task)
            versus = entry["student_minus_control"][task]
            cells = [
                family,
                task,
                "no scratch row" if gap is None else _span(gap, 100, "{:+.1f}"),
                _span(entry["student_retention"][task], 100, "{:.1f}%"),
                _span(entry["control_retention"][task], 100, "{:.1f}%"),
                _span(versus, 100, "{:+.1f}"),
                str(versus["n"]),
                entry["conclusions"][task],
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _span(d: dict[str, Any], scale: float, fmt: str) -> str:
    """`mean [low, high]`, or the mean and why there is no interval; the verdict where it has one."""
    text = fmt.format(scale * d["mean"])
    if d["low"] is None:
        return f"{text} (one seed)"
    span = f"{text} [{fmt.format(scale * d['low'])}, {fmt.format(scale * d['high'])}]"
    return span if d["verdict"] == NOT_DISTINGUISHABLE else f"{span}, {d['verdict']}"


def _shared_mean(scores: dict[str, Any], role: str) -> float:
    """`role`'s mean over the seeds all three rows ran (the teacher's row may have run more)."""
    shared = set(scores["teacher"]) & set(scores["student"]) & set(scores["control"])
    if not shared:
        raise DataError(
            f"distillation rows share no fine-tuning seed (teacher {sorted(scores['teacher'])}, student "
            f"{sorted(scores['student'])}, control {sorted(scores['control'])}); expected at least one"
        )
    return statistics.fmean(scores[role][seed] for seed in sorted(shared))


def _label(role: str, numbers: dict[str, Any]) -> str:
    if role == "student":
        made = numbers["made"]
        return f"student: teacher layers {made['layer_map']}, {made['loss']}"
    return {"teacher": "teacher (pretrain)", "control": "control: same student, from scratch"}[role]


def flatten(values: dict[str, Any], prefix: str = "") -> dict[str, float]:
    flat = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[f"{prefix}{key}"] = float(value)
    return flat


@dataclass(frozen=True, kw_only=True, eq=False)
class DistillSummaryPlan(Plan):
    """The `distill_summary` stage's plan."""

    distill_summary: DistillSummaryConfig = read(distill_summary_config)
    train: TrainConfig = read(train_config)
    seed: int = read(seed_value)


def run(plan: DistillSummaryPlan) -> StageResult:
    summary_cfg = plan.distill_summary
    summary, latencies = summarise(summary_cfg, plan.train, plan.seed)
    out = Path(summary_cfg.out_dir)
    write_json(out / "summary.json", summary)
    write_text(out / "summary.md", render(summary))
    write_timings(
        out / "summary.json", {"latency_ms": latencies}
    )  # lmforge.timings: beside the summary, read by no stage
    return StageResult(
        flatten({**summary, "latency_ms": latencies}), [str(out / "summary.json"), str(out / "summary.md")]
    )
