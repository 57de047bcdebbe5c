"""The `arch_eval` stage: the architecture experiments' numbers and figures, from the decoders of
pipelines/experiments/dvc.yaml's arch_pretrain (one knob changed each, same data, steps and schedule).

- positions: test loss in windows of each length (the training length and longer), and past the
  training length alone; the degradation, in the longest windows, of the loss past the training
  length over the loss within it (the same model, the same windows: what extrapolation costs it),
  compared with the first run's; the loss by position in the longest windows (positions.png).
- kv_heads: KV-cache bytes per token (read off the allocated cache), test loss; greedy decoding
  tokens per second with the cache, and the reference decoded without the cache (the KV cache's
  speed-up), timed side by side.
- norms: test loss, and the median train-step time, timed side by side.
Differences of test loss are paired by test window: the mean difference with its 95% Student-t
interval over windows (`lmforge.stats.paired`). That interval measures the test sample, not the
training seed: each run trained once.

Writes {out_dir}.json (flat metrics) and {out_dir}/ arch.json, summary.md, positions.png, kv_heads.png:
what the checkpoints and the test windows decide. The times (decoding, train steps) are clock
readings: they go to MLflow and to the timings file `reports/timings/arch.json` (`lmforge.timings`),
which findings does not read; its speed claims are judged from the benchmarks' side-by-side ratios.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from lmforge.architecture.config import ArchConfig, arch_config
from lmforge.architecture.measures import (
    decode_seconds,
    interleaved_medians,
    kv_cache_bytes_per_token,
    train_step_seconds,
)
from lmforge.architecture.plots import kv_figure, positions_figure
from lmforge.errors import ConfigError, DataError
from lmforge.interpret.data import text_windows
from lmforge.interpret.induction import token_losses
from lmforge.io import write_json, write_text
from lmforge.model.params import count_parameters
from lmforge.stage import Plan, StageResult, read
from lmforge.stats import paired
from lmforge.timings import write_timings
from lmforge.tokenizer.config import TokenizerConfig, tokenizer_config
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
from lmforge.training.checkpoints import load_module
from lmforge.training.config import TrainConfig, train_config
from lmforge.training.pretrain import tokenizer_paths


def difference(a: torch.Tensor, b: torch.Tensor, names: tuple[str, str]) -> dict:
    """a - b of per-window mean losses, paired by window, with its interval and verdict."""
    d = paired(dict(enumerate(a.tolist())), dict(enumerate(b.tolist())), names)
    return d.to_dict()


def degradation(tokens: torch.Tensor, train_length: int) -> torch.Tensor:
    """(N,): each window's mean loss past the training length minus its mean loss within it."""
    return tokens[:, train_length - 1 :].mean(1) - tokens[:, : train_length - 1].mean(1)


def pretrain_record(folder: Path, run: str) -> dict:
    path = folder / run / "metrics.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(
            f"{path}: {err}; expected the pretrain stage's metrics (run arch_pretrain first)"
        ) from None


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class ArchEvalPlan(Plan):
    """The `arch_eval` stage's plan."""

    arch: ArchConfig = read(arch_config)
    tokenizer: TokenizerConfig = read(tokenizer_config)
    train: TrainConfig = read(train_config)


def run(plan: ArchEvalPlan) -> StageResult:
    cfg, out = plan.arch, Path(plan.arch.out_dir)
    train_length = plan.train.seq_len
    if train_length not in cfg.lengths or train_length == cfg.lengths[-1]:
        raise ConfigError(
            f"arch.lengths: got {list(cfg.lengths)}, expected the training length train.seq_len={train_length} "
            "and at least one longer length"
        )
    tokenizer_file, encoded_dir = tokenizer_paths(plan.tokenizer)
    eos = special_token_ids(load_tokenizer(tokenizer_file)).eos
    names = list(dict.fromkeys([*cfg.positions, *cfg.kv_heads, *cfg.norms]))
    models = {name: load_module(Path(cfg.models_dir) / name / "best.ckpt").model for name in names}
    records = {name: pretrain_record(Path(cfg.pretrain_reports), name) for name in names}
    for name, model in models.items():
        if model.config.max_seq_len < cfg.lengths[-1]:
            raise DataError(
                f"arch.lengths: got {cfg.lengths[-1]} tokens, but {name} holds {model.config.max_seq_len} "
                "positions; expected runs trained with model.max_seq_len >= the longest length"
            )
    windows = {n: text_windows(encoded_dir, n, eos, cfg.max_windows, cfg.batch_size) for n in cfg.lengths}
    losses = {
        (name, n): token_losses(models[name], windows[n])
        for name in names
        for n in (cfg.lengths if name in cfg.positions else [train_length])
    }

    def describe(name: str) -> dict:
        c = models[name].config
        return {
            "run": name,
            "position": c.position.value,
            "norm": c.norm.value,
            "n_heads": c.n_heads,
            "n_kv_heads": c.kv_heads,
            "parameters": count_parameters(models[name])["total"],
            "val_loss": records[name]["best_val_loss"],
            "test_loss": losses[(name, train_length)].mean().item(),
        }

    positions = []
    for name in cfg.positions:
        row = describe(name)
        for n in cfg.lengths:
            tokens = losses[(name, n)]
            row[f"loss_{n}"] = tokens.mean().item()
            if n > train_length:  # predictions of tokens past the training length: positions >= train_length
                row[f"loss_past_{train_length}_{n}"] = tokens[:, train_length - 1 :].mean().item()
        positions.append(row)
    longest = cfg.lengths[-1]
    reference = cfg.positions[0]

    prompts = windows[train_length][0][: cfg.decode_batch, : cfg.prompt_tokens]
    jobs = {
        name: (lambda m=models[name]: decode_seconds(m, prompts, cfg.new_tokens, use_cache=True))
        for name in cfg.kv_heads
    }
    jobs["no_cache"] = lambda m=models[cfg.kv_heads[0]]: decode_seconds(
        m, prompts, cfg.new_tokens, use_cache=False
    )
    decode = interleaved_medians(jobs, cfg.repeats)
    generated = cfg.decode_batch * cfg.new_tokens
    kv_rows, clock = [], {}  # clock: the times, for the timings file and MLflow alone
    base_bytes = kv_cache_bytes_per_token(models[cfg.kv_heads[0]], longest)
    for name in cfg.kv_heads:
        row = describe(name)
        row["kv_bytes_per_token"] = kv_cache_bytes_per_token(models[name], longest)
        row["kv_saving"] = base_bytes / row["kv_bytes_per_token"]
        clock[f"kv_heads/{row['n_kv_heads']}/decode_tokens_per_second"] = generated / decode[name]
        row["test_loss_minus_reference"] = difference(
            losses[(name, train_length)].mean(1),
            losses[(cfg.kv_heads[0], train_length)].mean(1),
            (name, cfg.kv_heads[0]),
        )
        kv_rows.append(row)
    cache = {
        "run": cfg.kv_heads[0],
        "prompt_tokens": cfg.prompt_tokens,
        "new_tokens": cfg.new_tokens,
        "batch": cfg.decode_batch,
    }
    clock["kv_cache/decode_tokens_per_second_cache"] = generated / decode[cfg.kv_heads[0]]
    clock["kv_cache/decode_tokens_per_second_no_cache"] = generated / decode["no_cache"]
    clock["kv_cache/speedup"] = decode["no_cache"] / decode[cfg.kv_heads[0]]

    step_ids = torch.cat(windows[train_length])[: plan.train.batch_size]
    step_jobs = {name: (lambda m=models[name]: train_step_seconds(m, step_ids)) for name in cfg.norms}
    for job in step_jobs.values():
        job()  # warm-up: first calls allocate
    steps = interleaved_medians(step_jobs, 3 * cfg.repeats)
    norm_rows = []
    for name in cfg.norms:
        row = describe(name)
        clock[f"norms/{name}/train_step_seconds"] = steps[name]
        clock[f"norms/{name}/step_time_ratio"] = steps[name] / steps[cfg.norms[0]]
        row["test_loss_minus_reference"] = difference(
            losses[(name, train_length)].mean(1),
            losses[(cfg.norms[0], train_length)].mean(1),
            (name, cfg.norms[0]),
        )
        norm_rows.append(row)

    for row, name in zip(positions, cfg.positions):
        row[f"degradation_{longest}"] = degradation(losses[(name, longest)], train_length).mean().item()
        row["degradation_minus_reference"] = difference(
            degradation(losses[(name, longest)], train_length),
            degradation(losses[(reference, longest)], train_length),
            (name, reference),
        )

    report = {
        "train_length": train_length,
        "lengths": list(cfg.lengths),
        "windows": {str(n): sum(len(w) for w in windows[n]) for n in cfg.lengths},
        "positions": positions,
        "kv_heads": kv_rows,
        "kv_cache": cache,
        "norms": norm_rows,
    }
    metrics = flat_metrics(report)
    figures = [
        positions_figure(
            {name: losses[(name, longest)].mean(0) for name in cfg.positions},
            {name: models[name].config.position.value for name in cfg.positions},
            train_length,
            out / "positions.png",
        ),
        kv_figure(kv_rows, out / "kv_heads.png"),
    ]
    write_json(out / "arch.json", report)
    write_json(out.with_suffix(".json"), metrics)
    write_text(out / "summary.md", summary(report))
    write_timings(out.with_suffix(".json"), clock)
    return StageResult(
        {**metrics, **clock},
        [str(out.with_suffix(".json")), str(out / "arch.json"), str(out / "summary.md"), *map(str, figures)],
    )


def flat_metrics(report: dict) -> dict[str, float]:
    """Every number the summary shows, flat (the findings stage reads this file, which dvc.lock pins)."""
    m: dict[str, float] = {}

    def put(prefix: str, d: dict) -> None:
        m[f"{prefix}"] = d["mean"]
        if d["low"] is not None:
            m[f"{prefix}_low"], m[f"{prefix}_high"] = d["low"], d["high"]

    for row in report["positions"]:
        for key, value in row.items():
            if key.startswith(("loss_", "degradation_")) and not isinstance(value, dict):
                m[f"positions/{row['position']}/{key}"] = value
        put(f"positions/{row['position']}/degradation_minus_reference", row["degradation_minus_reference"])
    for row in report["kv_heads"]:
        k = row["n_kv_heads"]
        for key in ["n_heads", "kv_bytes_per_token", "kv_saving", "test_loss"]:
            m[f"kv_heads/{k}/{key}"] = float(row[key])
        put(f"kv_heads/{k}/loss_minus_reference", row["test_loss_minus_reference"])
    for row in report["norms"]:
        m[f"norms/{row['norm']}/test_loss"] = row["test_loss"]
        put(f"norms/{row['norm']}/loss_minus_reference", row["test_loss_minus_reference"])
    return m


def _interval(d: dict) -> str:
    if d["low"] is None:
        return f"{d['mean']:+.3f}"
    return f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"


def summary(report: dict) -> str:
    T, lengths = report["train_length"], report["lengths"]
    longer = [n for n in lengths if n > T]
    counts = ", ".join(f"{report['windows'][str(n)]} windows of {n}" for n in lengths)
    lines = [
        "# Architecture experiments at equal compute",
        "",
        f"Decoders trained on {T}-token windows, same data, steps and schedule, one knob changed; test "
        f"loss in nats per token ({counts}). "
        "Intervals: 95%, paired by test window (the test sample's spread, not the training seed's). "
        f"Degradation: in the {lengths[-1]}-token windows, the loss past position {T} minus the loss before it.",
        "",
        "## Positions",
        "",
        "| position | val loss | "
        + " | ".join(f"test loss at {n}" for n in lengths)
        + " | "
        + " | ".join(f"past {T} (at {n})" for n in longer)
        + f" | degradation at {lengths[-1]} | minus {report['positions'][0]['position']}'s |",
        "|---|---|" + "---|" * (len(lengths) + len(longer) + 2),
    ]
    for row in report["positions"]:
        lines.append(
            f"| {row['position']} | {row['val_loss']:.3f} | "
            + " | ".join(f"{row[f'loss_{n}']:.3f}" for n in lengths)
            + " | "
            + " | ".join(f"{row[f'loss_past_{T}_{n}']:.3f}" for n in longer)
            + f" | {row[f'degradation_{lengths[-1]}']:+.3f} | {_interval(row['degradation_minus_reference'])} |"
        )
    cache = report["kv_cache"]
    lines += [
        "",
        "## Grouped-query attention",
        "",
        "| query heads / KV heads | parameters | KV bytes per token | saving | test loss | minus MHA |",
        "|---|---|---|---|---|---|",
        *[
            f"| {r['n_heads']} / {r['n_kv_heads']} | {r['parameters']:,} | {r['kv_bytes_per_token']:.0f} | "
            f"{r['kv_saving']:.1f}x | {r['test_loss']:.3f} | {_interval(r['test_loss_minus_reference'])} |"
            for r in report["kv_heads"]
        ],
        "",
        f"KV cache: greedy decoding of {cache['new_tokens']} tokens after {cache['prompt_tokens']} "
        f"(batch {cache['batch']}) with and without the cache, and each run's train step, are timed side by "
        "side; the times are in reports/timings/arch.json (a clock, kept out of this report).",
        "",
        "## Norms",
        "",
        "| norm | val loss | test loss | minus LayerNorm |",
        "|---|---|---|---|",
        *[
            f"| {r['norm']} | {r['val_loss']:.3f} | {r['test_loss']:.3f} | {_interval(r['test_loss_minus_reference'])} |"
            for r in report["norms"]
        ],
        "",
    ]
    return "\n".join(lines)
