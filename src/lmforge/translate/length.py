"""The `translate_length` experiment: translation quality against training length, beside the dictionary.

At 1,400 steps (2.6 epochs) the tiny 2017 model beat the word-by-word dictionary on BLEU but not on
chrF; issue 25 asks whether training longer pays (the default run now trains 4,200). One long run
(`translate_train translate_run=length`) keeps the averaged weights every `translate.keep_every`
steps (`model_step{N}.ckpt`: the model a run stopped at step N with the same validation schedule
would have written, since the Noam schedule does not depend on the run's length and the batch order
is seeded) and its final `model.ckpt`. This stage decodes the test books with each of them at every
beam size of `translate.beam_sizes`, scores BLEU and chrF with sacreBLEU, and gives the configured
beam's difference to the dictionary with its 95% paired bootstrap interval: the model beats the
dictionary on a metric where the whole interval lies above zero, falls below it where the whole
interval lies below, and is not distinguishable from it otherwise.

Outputs under {reports_dir} (beside the training run's curves): length.md, length.json, length.png.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lmforge.curves import read_val_curve
from lmforge.errors import DataError
from lmforge.io import atomic_path, write_json, write_text
from lmforge.stage import StageResult
from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
from lmforge.translate.config import TranslateConfig, TranslateEvalPlan, tokenizer_file
from lmforge.translate.evaluate import (
    Dictionary,
    checked_module,
    corpus_difference,
    decode_all,
    score,
    scored_split,
)
from lmforge.translate.pairs import read_split
from lmforge.translate.train import kept_checkpoint

METRICS = ("bleu", "chrf")


def checkpoints(translate: TranslateConfig, final_step: int) -> list[tuple[int, Path]]:
    """(step, weights) of the run: every multiple of keep_every short of the last step, then the last."""
    out = Path(translate.out_dir)
    every = translate.keep_every or final_step
    kept = [(step, kept_checkpoint(out, step)) for step in range(every, final_step, every)]
    found = [*kept, (final_step, out / "model.ckpt")]
    missing = [str(path) for _, path in found if not path.is_file()]
    if missing:
        raise DataError(
            f"{missing[0]}: not found; expected the checkpoints of translate_train with "
            f"translate.keep_every={translate.keep_every} (rerun it)"
        )
    return found


def verdict(low: float, high: float) -> str:
    if low > 0:
        return "above"
    if high < 0:
        return "below"
    return "not distinguishable"


def plot(rows: list[dict[str, Any]], dictionary: dict[str, float], beams: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    steps = [r["step"] for r in rows]
    for ax, metric, label in zip(axes, METRICS, ("BLEU", "chrF")):
        for beam in beams:
            ax.plot(steps, [r[f"{metric}_beam{beam}"] for r in rows], marker="o", label=f"beam {beam}")
        ax.axhline(dictionary[metric], color="grey", linestyle="--", label="dictionary")
        ax.set_xlabel("training step")
        ax.set_ylabel(f"{label} (test books)")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def run(plan: TranslateEvalPlan) -> StageResult:
    pairs_cfg, translate = plan.pairs, plan.translate
    reports = Path(translate.reports_dir)
    try:
        trained = json.loads((reports / "metrics.json").read_text())
        curve = dict(read_val_curve(reports / "val_loss.csv"))
    except (OSError, ValueError, KeyError) as err:
        raise DataError(f"{reports}: {err}; expected a finished translate_train run") from None
    found = checkpoints(translate, int(trained["steps"]))
    tokenizer = load_tokenizer(tokenizer_file(translate.tokenizer_dir))
    specials = special_token_ids(tokenizer)
    first = checked_module(found[0][1], tokenizer)  # every kept checkpoint shares its config
    test, refs, batches = scored_split(
        pairs_cfg.out_dir, translate, tokenizer, specials, first.model_config.max_seq_len
    )
    word_by_word = Dictionary(read_split(pairs_cfg.out_dir, "train"))
    dictionary_hyps = [word_by_word(p.source) for p in test]
    dictionary = score(dictionary_hyps, refs)
    beams = sorted(set(translate.beam_sizes) | {translate.decode.beam_size})
    main = translate.decode.beam_size
    steps_per_epoch = trained["steps"] / trained["epochs"]
    rows: list[dict[str, Any]] = []
    for i, (step, path) in enumerate(found):
        module = first if i == 0 else checked_module(path, tokenizer)
        row: dict[str, Any] = {"step": step, "epochs": step / steps_per_epoch, "val_loss": curve.get(step)}
        for beam in beams:
            hyps = decode_all(module.model, tokenizer, batches, specials, translate.decode, beam).hypotheses
            scores = score(hyps, refs)
            row |= {f"bleu_beam{beam}": scores["bleu"], f"chrf_beam{beam}": scores["chrf"]}
            if beam == main:
                for metric in METRICS:
                    diff, low, high = corpus_difference(hyps, dictionary_hyps, refs, metric)
                    row |= {
                        f"{metric}_vs_dictionary": diff,
                        f"{metric}_vs_dictionary_low": low,
                        f"{metric}_vs_dictionary_high": high,
                        f"{metric}_verdict": verdict(low, high),
                    }
        rows.append(row)
    beats = [r["step"] for r in rows if all(r[f"{m}_verdict"] == "above" for m in METRICS)]
    summary = {
        "beam_size": main,
        "dictionary_bleu": dictionary["bleu"],
        "dictionary_chrf": dictionary["chrf"],
        "test_sentences": len(test),
        "first_step_above_dictionary_on_both": beats[0] if beats else None,
        "rows": rows,
    }
    lines = [
        f"# Translation quality against training length: {len(test)} test verses, beam {main} against "
        "the word-by-word dictionary",
        "",
        f"Dictionary: BLEU {dictionary['bleu']:.2f}, chrF {dictionary['chrf']:.2f}. Differences are the "
        f"beam-{main} model's minus the dictionary's, with a 95% paired bootstrap interval.",
        "",
        "| step | epochs | val loss | "
        + " | ".join(f"BLEU beam {b} | chrF beam {b}" for b in beams)
        + " | BLEU - dictionary | chrF - dictionary |",
        "|---" * (3 + 2 * len(beams) + 2) + "|",
    ]
    for r in rows:
        val = "" if r["val_loss"] is None else f"{r['val_loss']:.3f}"
        cells = [f"{r['step']}", f"{r['epochs']:.1f}", val]
        cells += [f"{r[f'{m}_beam{b}']:.2f}" for b in beams for m in METRICS]
        cells += [
            f"{r[f'{m}_vs_dictionary']:+.2f} [{r[f'{m}_vs_dictionary_low']:+.2f}, "
            f"{r[f'{m}_vs_dictionary_high']:+.2f}] {r[f'{m}_verdict']}"
            for m in METRICS
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"First step whose model is above the dictionary on both BLEU and chrF: "
        f"{beats[0] if beats else 'none of these'}.",
    ]
    write_text(reports / "length.md", "\n".join(lines) + "\n")
    write_json(reports / "length.json", summary)
    plot(rows, dictionary, beams, reports / "length.png")
    last = rows[-1]
    metrics = {
        "final_step": float(last["step"]),
        **{f"final_{m}_vs_dictionary": float(last[f"{m}_vs_dictionary"]) for m in METRICS},
        **{f"final_{m}": float(last[f"{m}_beam{main}"]) for m in METRICS},
    }
    names = ("length.md", "length.json", "length.png")
    return StageResult(metrics, [str(reports / n) for n in names])
