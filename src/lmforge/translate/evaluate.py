"""The `translate_eval` stage: translate the test books and score them with sacreBLEU and chrF.

sacreBLEU is called as its documentation shows (`BLEU().corpus_score(hypotheses, [references])`,
default 13a tokenisation, detokenised text on both sides), and its signature string goes into the
report so a number can be compared with another paper's. Two baselines are scored the same way:
copying the source sentence, and a word-by-word dictionary learnt from the training pairs (each
source word becomes the target word with the highest Dice coefficient of sentence co-occurrence,
2 c(s, t) / (c(s) + c(t)); words never seen are copied). BLEU is measured for every beam size in
`translate.beam_sizes` (a curve for `dvc plots` and a PNG); the configured beam size gives the
headline numbers and the samples. The test sources are encoded and batched once, and each beam size
decodes and is scored once. Each beam size's BLEU minus greedy's comes with a 95% interval from the
paired bootstrap over test sentences (Koehn 2004: both systems scored on the same resampled sets,
from sacreBLEU's own per-sentence statistics), so "beam beats greedy" can be told from noise.

Outputs under {reports_dir}: eval.json (metrics), bleu.md (the table with the signatures),
samples.md (source, reference, hypothesis), bleu_by_beam.csv and bleu_by_beam.png.
"""

from __future__ import annotations

import csv
import io
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from lmforge.errors import DataError
from lmforge.io import atomic_path, write_json, write_text
from lmforge.objectives.collate import pad
from lmforge.stage import StageResult
from lmforge.timings import timings_path, write_timings
from lmforge.tokenizer.specials import SpecialTokens, load_tokenizer, special_token_ids
from lmforge.training.checkpoints import load_module
from lmforge.translate.batches import encode_pairs
from lmforge.translate.config import (
    DecodeConfig,
    LongPairs,
    TranslateConfig,
    TranslateEvalPlan,
    tokenizer_file,
)
from lmforge.translate.decode import translate_batch
from lmforge.translate.pairs import Pair, read_split

WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def score(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, Any]:
    """Corpus BLEU and chrF with their signatures (sacreBLEU's defaults)."""
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(list(hypotheses), [list(references)])
    c = chrf.corpus_score(list(hypotheses), [list(references)])
    return {
        "bleu": b.score,
        "chrf": c.score,
        "bleu_detail": str(b),
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


BOOTSTRAP_SAMPLES = 1000  # resampled test sets for a difference's interval (sacreBLEU's paired bs: 1000)


def corpus_difference(
    a: Sequence[str],
    b: Sequence[str],
    references: Sequence[str],
    metric: str = "bleu",
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Corpus BLEU (or chrF) of hypotheses `a` minus that of `b` on the same references, and its 95%
    paired bootstrap interval (percentiles over `samples` test sets drawn with replacement, each
    scored for both systems)."""
    from sacrebleu.metrics import BLEU, CHRF

    if not len(a) == len(b) == len(references) > 0:
        raise ValueError(
            f"corpus_difference: got {len(a)}, {len(b)} and {len(references)} sentences, expected one count > 0"
        )
    metrics = {"bleu": BLEU, "chrf": CHRF}
    if metric not in metrics:
        raise ValueError(f"corpus_difference: got metric {metric!r}, expected one of {sorted(metrics)}")
    scorer = metrics[metric]()
    # sacreBLEU's sufficient statistics per sentence (n-gram matches and totals, lengths), as its
    # significance module reads them; a corpus's score is computed from their sum
    stats = [np.array(scorer._extract_corpus_statistics(list(h), [list(references)])) for h in (a, b)]

    def corpus(rows: np.ndarray) -> float:
        return scorer._compute_score_from_stats(rows.sum(0).tolist()).score

    picks = np.random.default_rng(seed).integers(0, len(references), size=(samples, len(references)))
    diffs = np.array([corpus(stats[0][i]) - corpus(stats[1][i]) for i in picks])
    low, high = np.percentile(diffs, [2.5, 97.5])
    return corpus(stats[0]) - corpus(stats[1]), float(low), float(high)


class Dictionary:
    """Word-by-word translation by Dice co-occurrence over the training pairs (lowercased words)."""

    def __init__(self, train: Sequence[Pair]) -> None:
        from sklearn.feature_extraction.text import CountVectorizer

        def vectorizer() -> CountVectorizer:
            return CountVectorizer(
                tokenizer=lambda s: WORD.findall(s.lower()), lowercase=False, binary=True, token_pattern=None
            )

        vs, vt = vectorizer(), vectorizer()
        xs = vs.fit_transform(p.source for p in train)  # (pairs, source words), 0/1
        xt = vt.fit_transform(p.target for p in train)
        co = (xs.T @ xt).tocsr().astype(np.float64)  # sentences in which s and t occur together
        cs, ct = np.asarray(xs.sum(0)).ravel(), np.asarray(xt.sum(0)).ravel()
        target_words = vt.get_feature_names_out()
        self.table: dict[str, str] = {}
        for i, word in enumerate(vs.get_feature_names_out()):
            row = co.getrow(i)
            if row.nnz:
                dice = 2 * row.data / (cs[i] + ct[row.indices])
                self.table[word] = target_words[row.indices[dice.argmax()]]

    def __call__(self, sentence: str) -> str:
        words = WORD.findall(sentence)
        out = [self.table.get(w.lower(), w) if w.isalnum() or w[0].isalnum() else w for w in words]
        return re.sub(r" ([,.;:!?)])", r"\1", " ".join(out))


class SourceBatch(NamedTuple):
    rows: list[int]  # indices of its pairs in the test split
    input_ids: torch.Tensor  # (B, S) sources + EOS, right-padded
    attention_mask: torch.Tensor  # (B, S)


def source_batches(
    tokenizer, pairs: Sequence[Pair], specials: SpecialTokens, max_len: int, long_pairs: LongPairs, size: int
) -> list[SourceBatch]:
    """The sources encoded once and cut into batches of similar length (little padding), for every
    beam size to decode."""
    encoded = encode_pairs(tokenizer, pairs, specials.eos, max_len, long_pairs, "test").pairs
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].source))
    batches = []
    for start in range(0, len(order), size):
        rows = order[start : start + size]
        ids, mask = pad([encoded[i].source for i in rows], specials.pad)
        batches.append(SourceBatch(rows, ids, mask))
    return batches


class ScoredSplit(NamedTuple):
    pairs: list[Pair]  # the test split, cut to `translate.test_examples`
    references: list[str]  # their targets
    batches: list[SourceBatch]  # their sources, encoded once for every model and beam


def scored_split(
    pairs_dir: str | Path, translate: TranslateConfig, tokenizer, specials: SpecialTokens, max_len: int
) -> ScoredSplit:
    """The test pairs every translation stage scores, with their references and encoded sources."""
    test = read_split(pairs_dir, "test")
    if translate.test_examples is not None:
        test = test[: translate.test_examples]
    batches = source_batches(
        tokenizer, test, specials, max_len, translate.long_pairs, translate.decode.batch_size
    )
    return ScoredSplit(test, [p.target for p in test], batches)


def checked_module(path: Path, tokenizer):
    """The model at `path`, refused in one line when its vocabulary is not the tokenizer's."""
    module = load_module(path)
    if module.model_config.vocab_size != tokenizer.get_vocab_size():
        raise DataError(
            f"{path}: vocabulary of {module.model_config.vocab_size}, expected the tokenizer's "
            f"{tokenizer.get_vocab_size()} (rerun translate_train)"
        )
    return module


class Decoded(NamedTuple):
    hypotheses: list[str]  # in the order of the test split
    seconds: float  # decoding the batches and detokenising, not encoding the sources


def decode_all(
    model,
    tokenizer,
    batches: Sequence[SourceBatch],
    specials: SpecialTokens,
    decode: DecodeConfig,
    beam_size: int,
) -> Decoded:
    """Every batch decoded with `beam_size`; the start token is EOS, which also ends every sentence."""
    start = time.perf_counter()
    out: list[list[int]] = [[] for _ in range(sum(len(b.rows) for b in batches))]
    for batch in batches:
        hyps = translate_batch(
            model,
            batch.input_ids,
            batch.attention_mask,
            bos=specials.eos,
            eos=specials.eos,
            pad=specials.pad,
            beam_size=beam_size,
            alpha=decode.length_penalty,
            max_len_a=decode.max_len_a,
            max_len_b=decode.max_len_b,
        )
        for i, hyp in zip(batch.rows, hyps):
            out[i] = hyp
    hypotheses = [tokenizer.decode(ids).strip() for ids in out]
    return Decoded(hypotheses, time.perf_counter() - start)


def plot(rows: list[dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.plot([r["beam_size"] for r in rows], [r["bleu"] for r in rows], marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xticks([r["beam_size"] for r in rows], [str(int(r["beam_size"])) for r in rows])
    ax.set_xlabel("beam size")
    ax.set_ylabel("BLEU (test books)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def samples_md(pairs: Sequence[Pair], hyps: Sequence[str], n: int, langs: tuple[str, str]) -> str:
    step = max(len(pairs) // n, 1)  # spread over the test books, not the first chapter only
    lines = ["# Sample translations (test books)", ""]
    for i in list(range(0, len(pairs), step))[:n]:
        p = pairs[i]
        lines += [
            f"**{p.id}**",
            "",
            f"- source ({langs[0]}): {p.source}",
            f"- reference ({langs[1]}): {p.target}",
            f"- hypothesis: {hyps[i]}",
            "",
        ]
    return "\n".join(lines)


def run(plan: TranslateEvalPlan) -> StageResult:
    pairs_cfg, translate = plan.pairs, plan.translate
    tokenizer = load_tokenizer(tokenizer_file(translate.tokenizer_dir))
    specials = special_token_ids(tokenizer)
    module = checked_module(Path(translate.out_dir) / "model.ckpt", tokenizer)
    test, refs, batches = scored_split(
        pairs_cfg.out_dir, translate, tokenizer, specials, module.model_config.max_seq_len
    )
    beams = sorted(set(translate.beam_sizes) | {translate.decode.beam_size})
    decoded = {
        beam: decode_all(module.model, tokenizer, batches, specials, translate.decode, beam) for beam in beams
    }
    scores = {beam: score(decoded[beam].hypotheses, refs) for beam in beams}
    by_beam = [{"beam_size": b, "bleu": scores[b]["bleu"], "chrf": scores[b]["chrf"]} for b in beams]
    greedy = 1 if 1 in decoded else None
    versus_greedy = {  # beam size -> (BLEU minus greedy's, 95% low, high)
        b: corpus_difference(decoded[b].hypotheses, decoded[1].hypotheses, refs)
        for b in beams
        if greedy and b > 1
    }
    main = scores[translate.decode.beam_size]
    dictionary = Dictionary(read_split(pairs_cfg.out_dir, "train"))
    copy = score([p.source for p in test], refs)
    word = score([dictionary(p.source) for p in test], refs)
    seconds = decoded[translate.decode.beam_size].seconds
    clock = {  # lmforge.timings: the timings file and MLflow, never what a consumer reads
        "decode_seconds": seconds,
        "sentences_per_second": len(test) / seconds,
        **{f"decode_seconds_beam{b}": decoded[b].seconds for b in beams},
    }
    metrics = {
        "bleu": main["bleu"],
        "chrf": main["chrf"],
        "beam_size": translate.decode.beam_size,
        "length_penalty": translate.decode.length_penalty,
        "baseline_copy_bleu": copy["bleu"],
        "baseline_copy_chrf": copy["chrf"],
        "baseline_dictionary_bleu": word["bleu"],
        "baseline_dictionary_chrf": word["chrf"],
        "test_sentences": len(test),
        **{f"bleu_beam{int(r['beam_size'])}": r["bleu"] for r in by_beam},
    }
    for b, (diff, low, high) in versus_greedy.items():
        metrics |= {
            f"bleu_beam{b}_vs_greedy": diff,
            f"bleu_beam{b}_vs_greedy_low": low,
            f"bleu_beam{b}_vs_greedy_high": high,
        }
    reports = Path(translate.reports_dir)
    table = [
        f"# Translation {pairs_cfg.source_lang} -> {pairs_cfg.target_lang}: {len(test)} test verses from unseen books",
        "",
        "| system | BLEU | chrF |",
        "|---|---|---|",
        f"| Transformer, beam {translate.decode.beam_size}, alpha {translate.decode.length_penalty} | "
        f"{main['bleu']:.2f} | {main['chrf']:.2f} |",
        *[
            f"| Transformer, beam {r['beam_size']} | {r['bleu']:.2f} | {r['chrf']:.2f} |"
            for r in by_beam
            if r["beam_size"] != translate.decode.beam_size
        ],
        f"| baseline: copy the source | {copy['bleu']:.2f} | {copy['chrf']:.2f} |",
        f"| baseline: word-by-word dictionary (Dice) | {word['bleu']:.2f} | {word['chrf']:.2f} |",
        "",
        *(
            ["| beam | BLEU minus greedy's (95% paired bootstrap interval) |", "|---|---|"]
            + [f"| {b} | {d:+.2f} [{lo:+.2f}, {hi:+.2f}] |" for b, (d, lo, hi) in versus_greedy.items()]
            + [""]
            if versus_greedy
            else []
        ),
        f"- BLEU signature: `{main['bleu_signature']}`",
        f"- chrF signature: `{main['chrf_signature']}`",
        f"- Beam {translate.decode.beam_size}: {main['bleu_detail']}",
        f"- Decoding: beam {translate.decode.beam_size}, batches of {translate.decode.batch_size}, KV cache; "
        f"its time is in {timings_path(reports / 'eval.json')}.",
    ]
    write_text(reports / "bleu.md", "\n".join(table) + "\n")
    langs = (pairs_cfg.source_lang, pairs_cfg.target_lang)
    write_text(
        reports / "samples.md",
        samples_md(test, decoded[translate.decode.beam_size].hypotheses, translate.samples, langs),
    )
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["beam_size", "bleu", "chrf"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(by_beam)
    write_text(reports / "bleu_by_beam.csv", buffer.getvalue())
    plot(by_beam, reports / "bleu_by_beam.png")
    write_json(reports / "eval.json", metrics)
    write_timings(reports / "eval.json", clock)  # the training's clock is reports/'s own
    names = ("eval.json", "bleu.md", "samples.md", "bleu_by_beam.csv", "bleu_by_beam.png")
    return StageResult(
        {k: float(v) for k, v in {**metrics, **clock}.items()}, [str(reports / n) for n in names]
    )
