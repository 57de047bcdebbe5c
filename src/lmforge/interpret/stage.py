"""The `interpret` stage: attention maps, logit lens, induction heads and in-context learning of the
default decoder, at its final checkpoint and along the checkpoints kept during pretraining.

Reads {checkpoints_dir}/{final}.ckpt and {checkpoints_dir}/{name}.ckpt for each name of
`trajectory` (with `weights_only=True`), the BPE tokenizer and its encoded test split. Writes to
{out_dir}.json the flat metrics (for `dvc metrics show` and MLflow) and to {out_dir}/ interpret.json
(every number, per checkpoint, layer and head), summary.md, attention_<i>.png (one per sentence),
logit_lens.png and induction.png.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from lmforge.errors import DataError
from lmforge.interpret.attention import attention_maps, head_statistics
from lmforge.interpret.data import text_windows
from lmforge.interpret.induction import (
    icl_by_window,
    icl_score,
    induction_scores,
    repeat_losses,
    repeated_sequences,
    token_losses,
)
from lmforge.interpret.lens import logit_lens
from lmforge.interpret.plots import attention_figure, induction_figure, lens_figure
from lmforge.io import write_json, write_text
from lmforge.stage import Plan, StageResult
from lmforge.stats import interval
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
from lmforge.training.checkpoints import load_module
from lmforge.training.pretrain import tokenizer_paths


def checkpoint_step(name: str) -> int:
    """`step300` -> 300: the step a kept checkpoint was written at."""
    match = re.fullmatch(r"step(\d+)", name)
    if match is None:
        raise DataError(
            f"interpret.trajectory: got '{name}', expected names of kept checkpoints like step300"
        )
    return int(match.group(1))


def run(plan: Plan) -> StageResult:
    cfg = plan.interpret
    folder, out = Path(cfg.checkpoints_dir), Path(cfg.out_dir)
    tokenizer_file, encoded_dir = tokenizer_paths(plan.tokenizer)
    tokenizer = load_tokenizer(tokenizer_file)
    specials = special_token_ids(tokenizer)
    final = load_module(folder / f"{cfg.final}.ckpt").model
    config = final.config
    length = plan.train.seq_len
    if 2 * cfg.induction_length + 1 > config.max_seq_len:
        raise DataError(
            f"interpret.induction_length: got {cfg.induction_length}, expected 2 * length + 1 <= the model's "
            f"max_seq_len {config.max_seq_len}"
        )
    windows = text_windows(encoded_dir, length, specials.eos, cfg.max_windows, cfg.batch_size)
    n_special = len(tokenizer.get_added_tokens_decoder())  # special tokens are the first ids
    sequences = repeated_sequences(
        cfg.induction_sequences, cfg.induction_length, n_special, config.vocab_size, specials.eos, cfg.seed
    )

    steps = [checkpoint_step(name) for name in cfg.trajectory]
    trajectory: list[dict] = []  # a list: the report's JSON sorts mapping keys
    scores, curves, lenses = [], {}, {}
    for name, step in zip(cfg.trajectory, steps):
        model = load_module(folder / f"{name}.ckpt").model
        score = induction_scores(model, sequences)
        losses = token_losses(model, windows)
        by_position = losses.mean(0)
        _, icl_low, icl_high = interval(
            icl_by_window(losses, cfg.early_position, cfg.late_position, cfg.band).tolist()
        )
        lenses[f"step {step}"] = logit_lens(model, windows)
        scores.append(score)
        curves[f"step {step}"] = by_position
        trajectory.append(
            {
                "checkpoint": name,
                "step": step,
                **repeat_losses(model, sequences),
                "induction_scores": score.tolist(),
                "max_induction_score": score.max().item(),
                "icl_score": icl_score(by_position, cfg.early_position, cfg.late_position, cfg.band),
                "icl_interval": [icl_low, icl_high],  # 95% Student-t over the windows' own scores
                "loss_by_position": by_position.tolist(),
                "logit_lens": lenses[f"step {step}"],
            }
        )

    heads = head_statistics(final, windows)
    final_scores = induction_scores(final, sequences)
    final_lens = logit_lens(final, windows)
    induction_heads = [
        f"L{layer + 1}H{head + 1}"
        for layer, head in (final_scores > cfg.induction_threshold).nonzero().tolist()
    ]
    report = {
        "checkpoint": str(folder / f"{cfg.final}.ckpt"),
        "windows": sum(len(w) for w in windows),
        "window_length": length,
        "logit_lens": final_lens,
        "heads": {key: value.tolist() for key, value in heads.items()},
        "induction_scores": final_scores.tolist(),
        "induction_heads": induction_heads,
        "induction_threshold": cfg.induction_threshold,
        **repeat_losses(final, sequences),
        "trajectory": trajectory,
    }
    last = trajectory[-1]
    metrics = {
        "lens_embeddings_loss": final_lens[0]["loss"],
        "lens_final_loss": final_lens[-1]["loss"],
        "lens_final_accuracy": final_lens[-1]["accuracy"],
        "max_induction_score": final_scores.max().item(),
        "induction_heads": float(len(induction_heads)),
        "first_copy_loss": report["first_copy_loss"],
        "second_copy_loss": report["second_copy_loss"],
        "repeat_gain": report["repeat_gain"],
        "icl_score": last["icl_score"],
        "icl_score_low": last["icl_interval"][0],
        "icl_score_high": last["icl_interval"][1],
        "max_previous_token_attention": heads["previous_token"].max().item(),
    }
    for layer in final_lens:
        metrics[f"lens_layer{layer['layer']}_loss"] = layer["loss"]
    for point in trajectory:
        metrics[f"icl_score_{point['checkpoint']}"] = point["icl_score"]
        metrics[f"max_induction_score_{point['checkpoint']}"] = point["max_induction_score"]

    figures = []
    for i, sentence in enumerate(cfg.sentences, start=1):
        ids = [specials.eos, *tokenizer.encode(sentence, add_special_tokens=False).ids][: config.max_seq_len]
        tokens = [
            "<eos>" if t == specials.eos else tokenizer.id_to_token(t).replace("\u0120", "_") for t in ids
        ]
        maps = attention_maps(final, torch.tensor(ids))
        figures.append(attention_figure(maps, tokens, out / f"attention_{i}.png", sentence))
    figures += [
        lens_figure(lenses, out / "logit_lens.png"),
        induction_figure(steps, scores, curves, cfg.induction_threshold, out / "induction.png"),
    ]
    write_json(out / "interpret.json", report)
    write_json(out.with_suffix(".json"), metrics)
    write_text(out / "summary.md", summary(report, cfg))
    files = [out.with_suffix(".json"), out / "interpret.json", out / "summary.md", *figures]
    return StageResult(metrics, [str(f) for f in files])


def summary(report: dict, cfg) -> str:
    lens = report["logit_lens"]
    lines = [
        "# Interpretability of the default decoder",
        "",
        f"Checkpoint `{report['checkpoint']}`; {report['windows']} test windows of {report['window_length']} tokens.",
        "",
        "## Logit lens",
        "",
        "| layer | loss (nats) | top-1 accuracy |",
        "|---|---|---|",
        *[f"| {r['layer']} | {r['loss']:.3f} | {100 * r['accuracy']:.1f}% |" for r in lens],
        "",
        "## Induction and in-context learning",
        "",
        f"Random tokens repeated twice ({cfg.induction_sequences} sequences of 2 x {cfg.induction_length}): "
        f"loss {report['first_copy_loss']:.3f} on the first copy, {report['second_copy_loss']:.3f} on the second.",
        f"Induction heads (score > {report['induction_threshold']}): "
        f"{', '.join(report['induction_heads']) or 'none'}.",
        "",
        "| checkpoint | first copy | second copy | max induction score | ICL score (95% interval) |",
        "|---|---|---|---|---|",
        *[
            f"| {t['checkpoint']} | {t['first_copy_loss']:.3f} | {t['second_copy_loss']:.3f} | "
            f"{t['max_induction_score']:.3f} | {t['icl_score']:+.3f} [{t['icl_interval'][0]:+.3f}, "
            f"{t['icl_interval'][1]:+.3f}] |"
            for t in report["trajectory"]
        ],
        "",
        f"ICL score: mean loss at positions {cfg.late_position} +- {cfg.band} minus at {cfg.early_position} +- "
        f"{cfg.band} (negative: later tokens, with more context, are predicted better).",
        "",
    ]
    return "\n".join(lines)
