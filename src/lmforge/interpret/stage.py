"""The `interpret` stage: what a pretrained model's layers and heads do, at its final checkpoint and
along the checkpoints kept during pretraining.

- Every model: attention maps of a few fixed sentences, per layer and head; per-head attention
  statistics over the test split; the logit lens, per layer and checkpoint.
- A decoder (`DECODER`): next-token logit lens, induction heads on repeated random tokens, and
  in-context learning (loss by position) along the checkpoints.
- An encoder (`ENCODER`): the logit lens at masked positions (the test windows packed as in MLM
  pretraining, 15% of their tokens selected as BERT does); induction and in-context learning read
  next-token prediction, which an encoder does not make.

Reads {run_dir}/{final}.ckpt and {run_dir}/{name}.ckpt for each name of
`trajectory` (with `weights_only=True`), the tokenizer and its encoded test split. Writes to
{out_dir}.json the flat metrics (for `dvc metrics show` and MLflow) and to {out_dir}/ interpret.json
(every number, per checkpoint, layer and head), summary.md, attention_<i>.png (one per sentence),
logit_lens.png and, for a decoder, induction.png. A final checkpoint with the weights of a kept one
(best.ckpt is often the last step's) is measured once, and the report names the kept one (`final_is`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from lmforge.errors import DataError
from lmforge.interpret.attention import attention_maps, head_statistics
from lmforge.interpret.config import InterpretConfig, interpret_config
from lmforge.interpret.data import text_windows
from lmforge.interpret.induction import (
    icl_by_window,
    icl_score,
    induction_scores,
    repeat_losses,
    repeated_sequences,
    shifted_induction_scores,
    token_losses,
)
from lmforge.interpret.lens import logit_lens, masked_logit_lens
from lmforge.interpret.masked import masked_windows
from lmforge.interpret.plots import attention_figure, induction_figure, lens_figure
from lmforge.io import write_json, write_text
from lmforge.model.config import Family
from lmforge.stage import Plan, StageResult, read
from lmforge.stats import interval
from lmforge.tokenizer.config import TokenizerConfig, tokenizer_config
from lmforge.tokenizer.specials import SpecialTokens, load_tokenizer, special_token_ids
from lmforge.training.checkpoints import load_module
from lmforge.training.config import TrainConfig, train_config
from lmforge.training.pretrain import tokenizer_paths

MASK_RATE = 0.15  # the encoder's lens: BERT's share of selected tokens, as its validation and evaluation


def checkpoint_step(name: str) -> int:
    """`step300` -> 300: the step a kept checkpoint was written at."""
    match = re.fullmatch(r"step(\d+)", name)
    if match is None:
        raise DataError(
            f"interpret.trajectory: got '{name}', expected names of kept checkpoints like step300"
        )
    return int(match.group(1))


def same_weights(a: nn.Module, b: nn.Module) -> bool:
    """Do two models hold the same tensors under the same names?"""
    left, right = a.state_dict(), b.state_dict()
    return left.keys() == right.keys() and all(torch.equal(left[k], right[k]) for k in left)


@dataclass(frozen=True)
class Inputs:
    """What the measures of one stage run read: the config, the final model and the test split."""

    cfg: InterpretConfig
    model: nn.Module  # the final checkpoint's
    specials: SpecialTokens
    n_special: int  # the tokenizer's special tokens, its first ids
    encoded_dir: Path
    length: int  # window length: the model's training length (train.seq_len)


@dataclass(frozen=True)
class Measures:
    """One family's measures. `prepare` builds, once, what every checkpoint is read on (`windows`,
    (B, T) batches of clean test text, and anything else); `at` measures one checkpoint; `metrics`,
    `summary` and `figures` turn the report (the final checkpoint's measures at the top level, each
    checkpoint's under `trajectory`) into flat metrics, summary lines and figure files."""

    prepare: Callable[[Inputs], dict[str, Any]]
    at: Callable[[nn.Module, dict[str, Any], InterpretConfig], dict[str, Any]]
    metrics: Callable[[dict[str, Any]], dict[str, float]]
    summary: Callable[[dict[str, Any], InterpretConfig], list[str]]
    figures: Callable[[dict[str, Any], InterpretConfig, Path], list[Path]]
    frame: Callable[[SpecialTokens, list[int]], list[int]]  # a sentence's ids as the model reads text
    causal: bool  # attention rows see only earlier keys
    lens_reads: str  # what the logit lens predicts, for the summary


# --- decoder: next-token lens, induction heads, in-context learning -------------------------------


def _decoder_prepare(inputs: Inputs) -> dict[str, Any]:
    cfg, config = inputs.cfg, inputs.model.config
    for key in ("induction_length", "shift_length"):
        if 2 * getattr(cfg, key) + 1 > config.max_seq_len:
            raise DataError(
                f"interpret.{key}: got {getattr(cfg, key)}, expected 2 * length + 1 <= the model's "
                f"max_seq_len {config.max_seq_len}"
            )
    eos = inputs.specials.eos
    low, high = inputs.n_special, config.vocab_size
    return {
        "windows": text_windows(inputs.encoded_dir, inputs.length, eos, cfg.max_windows, cfg.batch_size),
        "sequences": repeated_sequences(
            cfg.induction_sequences, cfg.induction_length, low, high, eos, cfg.seed
        ),
        "shifted": repeated_sequences(
            cfg.induction_sequences, cfg.shift_length, low, high, eos, cfg.seed + 1
        ),
    }


def _decoder_at(model: nn.Module, shared: dict[str, Any], cfg: InterpretConfig) -> dict[str, Any]:
    windows, sequences = shared["windows"], shared["sequences"]
    score = induction_scores(model, sequences)
    by_shift = shifted_induction_scores(model, [sequences, shared["shifted"]])  # (layers, heads, shifts)
    losses = token_losses(model, windows)
    by_position = losses.mean(0)
    _, icl_low, icl_high = interval(
        icl_by_window(losses, cfg.early_position, cfg.late_position, cfg.band).tolist()
    )
    return {
        **repeat_losses(model, sequences),
        "induction_scores": score.tolist(),
        "max_induction_score": score.max().item(),
        "shifted_scores": by_shift.amax(-1).tolist(),  # each head's best shift's score
        "shifts": by_shift.argmax(-1).tolist(),  # and that shift
        "max_shifted_score": by_shift.max().item(),
        "icl_score": icl_score(by_position, cfg.early_position, cfg.late_position, cfg.band),
        "icl_interval": [icl_low, icl_high],  # 95% Student-t over the windows' own scores
        "loss_by_position": by_position.tolist(),
        "logit_lens": logit_lens(model, windows),
    }


def _decoder_metrics(report: dict[str, Any]) -> dict[str, float]:
    last = report["trajectory"][-1]
    metrics = {
        "max_induction_score": report["max_induction_score"],
        "max_shifted_score": report["max_shifted_score"],
        "induction_heads": float(len(report["induction_heads"])),
        "first_copy_loss": report["first_copy_loss"],
        "second_copy_loss": report["second_copy_loss"],
        "repeat_gain": report["repeat_gain"],
        "icl_score": last["icl_score"],
        "icl_score_low": last["icl_interval"][0],
        "icl_score_high": last["icl_interval"][1],
    }
    for point in report["trajectory"]:
        metrics[f"icl_score_{point['checkpoint']}"] = point["icl_score"]
        metrics[f"max_induction_score_{point['checkpoint']}"] = point["max_induction_score"]
    return metrics


def _decoder_summary(report: dict[str, Any], cfg: InterpretConfig) -> list[str]:
    return [
        "## Induction and in-context learning",
        "",
        f"Random tokens repeated twice ({cfg.induction_sequences} sequences of 2 x {cfg.induction_length}): "
        f"loss {report['first_copy_loss']:.3f} on the first copy, {report['second_copy_loss']:.3f} on the second.",
        f"Induction heads (textbook or shifted score > {report['induction_threshold']}; the shifted score "
        f"reads the key s positions after the textbook one, the lower of copy lengths {cfg.induction_length} "
        f"and {cfg.shift_length}): {', '.join(report['induction_heads']) or 'none'}.",
        "",
        "| checkpoint | first copy | second copy | max induction score | max shifted score | ICL score (95% interval) |",
        "|---|---|---|---|---|---|",
        *[
            f"| {t['checkpoint']} | {t['first_copy_loss']:.3f} | {t['second_copy_loss']:.3f} | "
            f"{t['max_induction_score']:.3f} | {t['max_shifted_score']:.3f} | "
            f"{t['icl_score']:+.3f} [{t['icl_interval'][0]:+.3f}, "
            f"{t['icl_interval'][1]:+.3f}] |"
            for t in report["trajectory"]
        ],
        "",
        f"ICL score: mean loss at positions {cfg.late_position} +- {cfg.band} minus at {cfg.early_position} +- "
        f"{cfg.band} (negative: later tokens, with more context, are predicted better).",
        "",
    ]


def _decoder_figures(report: dict[str, Any], cfg: InterpretConfig, out: Path) -> list[Path]:
    trajectory = report["trajectory"]
    return [
        induction_figure(
            [t["step"] for t in trajectory],
            [torch.tensor(t["induction_scores"]) for t in trajectory],
            {f"step {t['step']}": torch.tensor(t["loss_by_position"]) for t in trajectory},
            cfg.induction_threshold,
            out / "induction.png",
        )
    ]


DECODER = Measures(
    prepare=_decoder_prepare,
    at=_decoder_at,
    metrics=_decoder_metrics,
    summary=_decoder_summary,
    figures=_decoder_figures,
    frame=lambda specials, ids: [specials.eos, *ids],
    causal=True,
    lens_reads="the next token",
)


# --- encoder: the lens at masked positions -------------------------------------------------------


def _encoder_prepare(inputs: Inputs) -> dict[str, Any]:
    cfg = inputs.cfg
    windows, masked = masked_windows(
        inputs.encoded_dir,
        inputs.length,
        inputs.specials,
        inputs.model.config.vocab_size,
        MASK_RATE,
        cfg.max_windows,
        cfg.batch_size,
        cfg.seed,
    )
    return {"windows": windows, "masked": masked}


ENCODER = Measures(
    prepare=_encoder_prepare,
    at=lambda model, shared, cfg: {"logit_lens": masked_logit_lens(model, shared["masked"])},
    metrics=lambda report: {},
    summary=lambda report, cfg: [],
    figures=lambda report, cfg, out: [],
    frame=lambda specials, ids: [specials.cls, *ids, specials.sep],
    causal=False,
    lens_reads=f"the original token at masked positions ({MASK_RATE:.0%} selected as BERT does)",
)

MEASURES = {Family.decoder: DECODER, Family.encoder: ENCODER}


@dataclass(frozen=True, kw_only=True, eq=False)
class InterpretPlan(Plan):
    """The `interpret` stage's plan."""

    interpret: InterpretConfig = read(interpret_config)
    tokenizer: TokenizerConfig = read(tokenizer_config)
    train: TrainConfig = read(train_config)


def run(plan: InterpretPlan) -> StageResult:
    cfg = plan.interpret
    folder, out = Path(cfg.run_dir), Path(cfg.out_dir)
    tokenizer_file, encoded_dir = tokenizer_paths(plan.tokenizer)
    tokenizer = load_tokenizer(tokenizer_file)
    specials = special_token_ids(tokenizer)
    final = load_module(folder / f"{cfg.final}.ckpt").model
    config = final.config
    measures = MEASURES.get(config.family)
    if measures is None:
        raise DataError(
            f"interpret.run_dir: {folder} holds an {config.family.value} model, expected a decoder "
            "or an encoder"
        )
    steps = [checkpoint_step(name) for name in cfg.trajectory]  # a bad name fails before any measure
    n_special = len(tokenizer.get_added_tokens_decoder())  # special tokens are the first ids
    shared = measures.prepare(Inputs(cfg, final, specials, n_special, encoded_dir, plan.train.seq_len))

    trajectory: list[dict] = []  # a list: the report's JSON sorts mapping keys
    final_is = None  # the kept checkpoint whose weights the final one holds, if any
    for name, step in zip(cfg.trajectory, steps):
        model = load_module(folder / f"{name}.ckpt").model
        if final_is is None and same_weights(model, final):
            final_is = len(trajectory)
        trajectory.append({"checkpoint": name, "step": step, **measures.at(model, shared, cfg)})
    if final_is is None:
        measured = measures.at(final, shared, cfg)
    else:
        measured = {k: v for k, v in trajectory[final_is].items() if k not in ("checkpoint", "step")}

    heads = head_statistics(final, shared["windows"], causal=measures.causal)
    report = {
        "model": cfg.title,
        "family": config.family.value,
        "checkpoint": str(folder / f"{cfg.final}.ckpt"),
        "final_is": None if final_is is None else cfg.trajectory[final_is],
        "windows": sum(len(w) for w in shared["windows"]),
        "window_length": plan.train.seq_len,
        "lens_reads": measures.lens_reads,
        **measured,
        "heads": {key: value.tolist() for key, value in heads.items()},
        "trajectory": trajectory,
    }
    if "induction_scores" in measured:
        textbook = torch.tensor(measured["induction_scores"])
        shifted, shifts = torch.tensor(measured["shifted_scores"]), measured["shifts"]
        above = (textbook > cfg.induction_threshold) | (shifted > cfg.induction_threshold)
        report["induction_heads"] = [
            f"L{layer + 1}H{head + 1}"
            + ("" if textbook[layer, head] > cfg.induction_threshold else f" (shift {shifts[layer][head]})")
            for layer, head in above.nonzero().tolist()
        ]
        report["induction_threshold"] = cfg.induction_threshold

    lens = report["logit_lens"]
    metrics = {
        "lens_embeddings_loss": lens[0]["loss"],
        "lens_final_loss": lens[-1]["loss"],
        "lens_final_accuracy": lens[-1]["accuracy"],
        "max_previous_token_attention": heads["previous_token"].max().item(),
        **measures.metrics(report),
    }
    for layer in lens:
        metrics[f"lens_layer{layer['layer']}_loss"] = layer["loss"]

    figures = []
    for i, sentence in enumerate(cfg.sentences, start=1):
        ids = measures.frame(specials, tokenizer.encode(sentence, add_special_tokens=False).ids)
        ids = ids[: config.max_seq_len]
        shown = {specials.eos: "<eos>"} if measures.causal else {}  # BPE's <|endoftext|>, shorter
        tokens = [shown.get(t) or tokenizer.id_to_token(t).replace("\u0120", "_") for t in ids]
        maps = attention_maps(final, torch.tensor(ids))
        figures.append(attention_figure(maps, tokens, out / f"attention_{i}.png", sentence))
    lenses = {f"step {t['step']}": t["logit_lens"] for t in trajectory}
    figures += [
        lens_figure(lenses, out / "logit_lens.png", measures.lens_reads),
        *measures.figures(report, cfg, out),
    ]
    write_json(out / "interpret.json", report)
    write_json(out.with_suffix(".json"), metrics)
    write_text(out / "summary.md", summary(report, cfg, measures))
    files = [out.with_suffix(".json"), out / "interpret.json", out / "summary.md", *figures]
    return StageResult(metrics, [str(f) for f in files])


def summary(report: dict, cfg: InterpretConfig, measures: Measures) -> str:
    lines = [
        f"# Interpretability of {report['model']}",
        "",
        f"Checkpoint `{report['checkpoint']}`"
        + (f" (the weights of {report['final_is']})" if report["final_is"] else "")
        + f"; {report['windows']} test windows of {report['window_length']} tokens.",
        "",
        "## Logit lens",
        "",
        f"Each layer's residual stream read through the final norm and the unembedding, predicting {report['lens_reads']}.",
        "",
        "| layer | loss (nats) | top-1 accuracy |",
        "|---|---|---|",
        *[f"| {r['layer']} | {r['loss']:.3f} | {100 * r['accuracy']:.1f}% |" for r in report["logit_lens"]],
        "",
        *measures.summary(report, cfg),
    ]
    return "\n".join(lines)
