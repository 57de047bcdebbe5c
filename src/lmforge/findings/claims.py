"""The claims the findings report tests, as data: one `Claim` row each (findings/claim.py), naming
the reports it reads (and their keys), the reader that turns them into parts (measures.py), the rule
that gives a part its verdict (the small functions below, over rules.py's intervals), and the words
of the report. One engine (`Claim.test`) turns a row into a finding. A report that is missing or
stale makes the claim "not tested" (evidence.py).

Every report path and key the findings read is in this table. The texts are format strings over the
reader's words and the config (`{cfg.loss_margin}`).
"""

from __future__ import annotations

from lmforge.findings import measures
from lmforge.findings.claim import Claim
from lmforge.findings.config import FindingsConfig
from lmforge.findings.rules import (
    NOT_DISTINGUISHABLE,
    NOT_IDENTIFIED,
    REFUTED,
    REPRODUCED,
    Part,
    combined,
)


def _above(p: Part, cfg: FindingsConfig) -> str:
    return p.values["difference"].against(0.0, "above")


def _below(p: Part, cfg: FindingsConfig) -> str:
    return p.values["difference"].against(0.0, "below")


def _few_labels(p: Part, cfg: FindingsConfig) -> str:
    """The lead with the fewest labels above zero, and above the lead with all labels (the two
    intervals apart)."""
    fewest, most = p.values["fewest"], p.values["most"]
    larger = NOT_DISTINGUISHABLE
    if most.has_spread:
        larger = REPRODUCED if fewest.above(most.high) else REFUTED if fewest.below(most.low) else larger
    return combined(fewest.against(0.0, "above"), larger)


def _ratio(ratio: float, floor: float) -> str:
    """A speed-up measured without an interval: reproduced at `floor` or more, refuted when the other
    way by as much, else within what side-by-side timing resolves."""
    return REPRODUCED if ratio >= floor else REFUTED if ratio * floor <= 1.0 else NOT_DISTINGUISHABLE


def _gqa(p: Part, cfg: FindingsConfig) -> str:
    saving, expected = p.values["saving"], p.values["expected"]
    if abs(saving - expected) > 0.01 * expected:
        return REFUTED
    return p.values["cost"].against(cfg.loss_margin, "below")


def _norms(p: Part, cfg: FindingsConfig) -> str:
    if "cost" in p.values:
        return p.values["cost"].against(cfg.loss_margin, "below")
    return _ratio(1.0 / p.values["ratio"], cfg.norm_speedup_floor)


def _induction(p: Part, cfg: FindingsConfig) -> str:
    if "icl" in p.values:
        return p.values["icl"].against(0.0, "below")
    if "score" in p.values:  # the repeated-span study: the seeds' interval of the best head's score
        found = p.values["score"].against(p.values["threshold"], "above")
    else:
        found = REPRODUCED if p.values["heads"] else REFUTED
    # no head refutes only where the study's positive control showed this training can form one
    return NOT_IDENTIFIED if found == REFUTED and not p.values["control"] else found


CONVERGED = "finetune_converged/summary.json"
ARCH = "arch.json"
# our encoder's rows against their scratch twins (LoRA rows aside), the part named by the task and,
# for the encoder pretrained on another corpus (`large-encoder-*`), by that corpus
PRETRAINED_VS_SCRATCH = (
    r"^(?:(?P<corpus>[a-z]+)-)?encoder-(?P<part>[^-]+)-(?:(?!lora).)*?vs-(?:[a-z]+-)?scratch-"
)
LORA_VS_FULL = r"^(?!scratch)(?:(?!-vs-).)*-lora(?:(?!-vs-).)*-vs-"  # a LoRA row against its full twin

CLAIMS: dict[str, Claim] = {
    c.key: c
    for c in [
        Claim(
            "pretraining",
            "Pretraining beats no pretraining",
            "Pretraining beats no pretraining: the same encoder fine-tuned from our pretrained weights scores "
            "higher than from a random init (Devlin et al. 2018).",
            "dvc.yaml `finetune` (conf/row/encoder-*.yaml against conf/row/scratch-*.yaml, 3 seeds each, 200 "
            "steps) and pipelines/experiments/dvc.yaml `finetune_converged` (the same rows fine-tuned to "
            "convergence, conf/row/converged/; and, as `finetune_large_runs`, from the encoder pretrained on "
            "data=large against its own scratch control): `dvc repro finetune_summary` and "
            "`dvc repro pipelines/experiments/dvc.yaml:finetune_converged`",
            sources={"200 steps": "finetune/summary.json", "to convergence": CONVERGED},
            read=measures.comparisons_by_budget,
            rule=_above,
            judged="a task at a budget is reproduced when pretrained - scratch's interval lies above zero, "
            "refuted when it lies below, not distinguishable when it covers zero{unread}",
            untested="the fine-tuning summary compares no pretrained row with its scratch row",
            needed="where it is not reproduced, a pretrained encoder whose head start survives fine-tuning on "
            "these tasks: "
            "more pretraining compute than the default budget (docs/pretraining.md; POS accuracy grows with "
            "it, docs/fine-tuning.md#downstream-score-against-pretraining-compute)",
            keys={
                "select": PRETRAINED_VS_SCRATCH,
                "quantity": "pretrained - scratch",
                "figure_title": "Pretrained minus scratch, fine-tuned (95% interval over seeds)",
            },
            figure="pretraining.png",
        ),
        Claim(
            "few_labels",
            "Pretraining helps most with few labels",
            "Pretraining helps most when labels are few (Howard & Ruder 2018).",
            "pipelines/experiments/dvc.yaml `learning_curve_runs` and `learning_curves` "
            "(conf/sweep/learning_curve.yaml): `dvc repro pipelines/experiments/dvc.yaml:learning_curves`",
            sources={
                "curves": "finetune/learning_curves.json",
                "figure": "finetune/learning_curves.png",
            },
            read=measures.learning_curves,
            rule=_few_labels,
            judged="a task is reproduced when the pretrained encoder's lead with the fewest labels lies above "
            "zero and above its lead with all labels (the two intervals apart), refuted when either lies on "
            "the other side, else not distinguishable",
            untested="no task has learning curves for both the pretrained and the scratch encoder",
            needed="on those tasks, a pretrained encoder that beats scratch at all (see the claim above), or "
            "more seeds where the intervals cover zero",
            keys={"ours": "encoder-{task}", "scratch": "scratch-{task}", "quantity": "pretrained - scratch"},
        ),
        Claim(
            "distillation",
            "A distilled student keeps most of its teacher",
            "A distilled student keeps most of its teacher (retention >= 90%) and beats the same student "
            "trained without the teacher (Sanh et al. 2019; Jiao et al. 2020).",
            "dvc.yaml `distill`, `distill_finetune`, `distill_summary` (conf/distill_run/, conf/distill_row/, 3 "
            "seeds): `dvc repro distill_summary`",
            sources={"summary": "distill/summary.json"},
            read=measures.distill_summary,
            rule=lambda p, cfg: combined(
                p.values["keep"].against(cfg.retention_floor, "above"), p.values["beat"].against(0.0, "above")
            ),
            judged="a task is reproduced when retention's interval lies above {floor} and student - control's "
            "above zero, refuted when either lies on the other side, else not distinguishable (a task where "
            "the teacher does not beat scratch says so: its teacher has little to pass on)",
            untested="no distillation summary could be read",
            needed="a longer distillation or a closer student (more layers); where the teacher does not beat "
            "scratch, a teacher that does",
            keys={
                "gap": "teacher_minus_scratch",
                "keep": "student_retention",
                "beat": "student_minus_control",
                "figure_title": "Distillation (95% interval over seeds)",
            },
            figure="distillation.png",
        ),
        Claim(
            "lora",
            "LoRA approaches full fine-tuning",
            "LoRA approaches full fine-tuning (within the margin) while training a small fraction of the "
            "weights (Hu et al. 2021).",
            "dvc.yaml `finetune` (encoder-sentiment-lora against encoder-sentiment) and "
            "pipelines/experiments/dvc.yaml `lora_grid_choice` (our encoder with LoRA's target modules, rank "
            "and rate chosen on validation from `lora_grid`: conf/grid/lora_encoder.yaml), "
            "`finetune_sequential` (MiniLM, 90 steps, blocks of 8 seeds until "
            "a look decides: conf/sequential/minilm_lora.yaml) and `finetune_converged` (MiniLM trained to "
            "convergence, 3 seeds): `dvc repro finetune_summary` and `dvc repro "
            "pipelines/experiments/dvc.yaml:lora_grid_choice pipelines/experiments/dvc.yaml:finetune_sequential "
            "pipelines/experiments/dvc.yaml:finetune_converged`",
            sources={
                "our encoder (the row's settings)": "finetune/summary.json",
                "our encoder (searched)": "lora_grid/summary.json",
                "MiniLM (90 steps)": "minilm_lora_sequential/summary.json",
                "MiniLM (converged)": CONVERGED,
            },
            read=measures.lora_comparisons,
            rule=lambda p, cfg: p.values["difference"].against(-cfg.lora_margin, "above"),
            judged="each backbone is reproduced when LoRA - full's interval lies above -{margin}, refuted when "
            "it lies below, not distinguishable when it crosses -{margin}",
            untested="no LoRA comparison could be read: {missing}",
            needed="more seeds where the interval crosses the margin; on our encoder LoRA stays far behind even "
            "at the targets, rank and rate validation chose, so the claim needs a backbone whose frozen "
            "features already carry the task, as MiniLM's do (ours do not beat scratch on sentiment)",
            keys={"select": LORA_VS_FULL, "figure_title": "LoRA minus full fine-tuning (95% interval)"},
            figure="lora.png",
        ),
        Claim(
            "warmup",
            "Post-LN needs warmup, Pre-LN does not",
            "Post-LN Transformers need learning-rate warmup where Pre-LN ones do not (Xiong et al. 2020): "
            "dropping warmup costs Post-LN much more validation loss than Pre-LN.",
            "pipelines/experiments/dvc.yaml `translate_warmup` (conf/translate_warmup/: pre/post x "
            "noam/constant, 2 seeds): `dvc repro pipelines/experiments/dvc.yaml:translate_warmup`",
            sources={
                "summary": "translate/warmup_summary/summary.json",
                "figure": "translate/warmup_summary/val_loss.png",
            },
            read=measures.warmup_penalties,
            rule=_above,
            judged="reproduced when Post-LN's penalty for dropping warmup minus Pre-LN's (paired by seed) lies "
            "above zero, refuted when below, not distinguishable when it covers zero{pre_note}",
            untested="the warmup summary lacks the cell {missing}",
            needed="more seeds, or a deeper stack where Post-LN's gradients near the output grow larger",
        ),
        Claim(
            "positions",
            "RoPE and ALiBi extrapolate, learned positions do not",
            "Relative positions (RoPE, ALiBi) extrapolate past the training length better than learned ones "
            "(Press et al. 2022).",
            "pipelines/experiments/dvc.yaml `arch_pretrain` (learned, sinusoidal, rope, alibi at 128 tokens, "
            "same budget) and `arch_eval`: `dvc repro pipelines/experiments/dvc.yaml:arch_eval`",
            sources={"metrics": ARCH, "figure": "arch/positions.png"},
            read=measures.positions,
            rule=_below,
            judged="each relative scheme is reproduced when its degradation past the training length minus "
            "learned positions' lies below zero, refuted when above, not distinguishable when it covers zero",
            untested="the architecture runs hold no learned-position reference or no relative scheme",
            needed="for RoPE, what later models add to extrapolate (position interpolation, NTK or YaRN scaling "
            "of the rotary base); ALiBi's linear bias needs none",
            keys={
                "prefix": "positions/",
                "degradation": r"positions/{p}/degradation_\d+",
                "difference": "positions/{p}/degradation_minus_reference",
                "reference": "learned",
                "decided": ("rope", "alibi"),
            },
        ),
        Claim(
            "gqa",
            "GQA/MQA shrink the KV cache at small loss cost",
            "Grouped-query and multi-query attention cut the KV cache by n_heads / n_kv_heads at a small loss "
            "cost (Shazeer 2019; Ainslie et al. 2023).",
            "pipelines/experiments/dvc.yaml `arch_pretrain` (4 query heads with 4, 2 and 1 KV heads, same "
            "budget) and `arch_eval`",
            sources={"metrics": ARCH, "figure": "arch/kv_heads.png"},
            read=measures.kv_heads,
            rule=_gqa,
            judged="each KV-head count is refuted when the measured cache does not shrink by n_heads/n_kv_heads; "
            "else reproduced when the loss increase's interval lies below {cfg.loss_margin} nats, refuted when "
            "above, not distinguishable when it covers it",
            untested="the architecture runs hold fewer than two KV-head counts",
            needed="uptraining from the MHA checkpoint (Ainslie et al.) instead of training each from scratch, "
            "or more seeds",
            keys={"prefix": "kv_heads/", "run": "kv_heads/{k}"},
        ),
        Claim(
            "kv_cache",
            "The KV cache speeds decoding",
            "A KV cache speeds up autoregressive decoding: each step attends over cached keys instead of "
            "recomputing the prefix.",
            "`python -m benchmarks --only generation` (benchmarks/generation.py: greedy decoding of 128 "
            "tokens by GPT-2- and LLaMA-shaped decoders with and without the cache, interleaved medians)",
            sources={"bench": "bench/generation.json"},
            read=measures.kv_cache,
            rule=lambda p, cfg: _ratio(p.values["speedup"], cfg.kv_speedup_floor),
            judged="each model and batch size is reproduced when decoding with the cache is at least "
            "{cfg.kv_speedup_floor}x faster (beyond host drift), refuted when it is that much slower, else not "
            "distinguishable; the smallest measured {speedup:.1f}x",
            untested="the generation benchmark timed no decoding without the cache",
            needed="longer generations, where recomputing the prefix costs more",
            keys={
                "ratio": r"(?P<model>[a-z0-9]+)_batch(?P<batch>\d+)_cache\.ratio",
                "of": "{model}_batch{batch}_cache",
                "figure_title": "Greedy decoding, with the cache / without",
            },
            figure="kv_cache.png",
        ),
        Claim(
            "norms",
            "RMSNorm matches LayerNorm, faster",
            "RMSNorm trains as well as LayerNorm at a lower cost per step (Zhang & Sennrich 2019).",
            "pipelines/experiments/dvc.yaml `arch_pretrain` (layer, rms) and `arch_eval` (test loss), and "
            "`python -m benchmarks --only norms` (benchmarks/norms.py: the pair at 64 to 1,024 wide, a "
            "training step and the norm alone, interleaved)",
            sources={"metrics": ARCH, "bench": "bench/norms.json"},
            read=measures.norms,
            rule=_norms,
            judged="the loss part is reproduced when RMSNorm - LayerNorm's interval lies below "
            "{cfg.loss_margin} nats, refuted when above, not distinguishable when it covers it; a speed "
            "part (a width) reproduced when RMSNorm's step is at least {cfg.norm_speedup_floor}x faster, "
            "refuted when that much slower, else not distinguishable",
            untested="the architecture runs hold no LayerNorm/RMSNorm pair",
            needed="for the speed parts, an RMSNorm kernel as fused as LayerNorm's: eager PyTorch on this CPU "
            "fuses LayerNorm's forward and backward but composes rms_norm's backward from elementwise ops, so "
            "the eager norm alone runs at a fraction of LayerNorm's speed; compiled, both get generated "
            "kernels and RMSNorm's saving appears, growing with width (the 'compiled' column)",
            keys={
                "loss": "norms/{n}/test_loss",
                "difference": "norms/rms/loss_minus_reference",
                "bench_step": r"step_d(?P<w>\d+)\.ratio",
                "bench_step_of": "step_d{w}.ratio",
                "bench_op_of": "op_d{w}.ratio",
                "bench_op_compiled_of": "op_compiled_d{w}.ratio",
                "figure_title": "Train step speed by width, RMSNorm / LayerNorm",
            },
            figure="norms.png",
        ),
        Claim(
            "scaling",
            "Loss follows a power law; ~20 tokens per parameter",
            "Loss follows a power law in parameters and tokens, L = E + A/N^alpha + B/D^beta, and the "
            "compute-optimal model trains on about 20 tokens per parameter (Hoffmann et al. 2022).",
            "dvc.yaml `scaling_sweep`, `scaling_fit` (conf/scaling/default.yaml) and "
            "pipelines/experiments/dvc.yaml `scaling_large` (conf/scaling/large.yaml): `dvc repro scaling_plots`",
            sources={
                "default": "scaling/default/fit.json",
                "large": "scaling/large/fit.json",
                "figure default": "scaling/default/figures/loss_vs_compute.png",
                "figure large": "scaling/large/figures/isoflop.png",
            },
            read=measures.scaling,
            rule=lambda p, cfg: REPRODUCED if p.values["identified"] else NOT_IDENTIFIED,
            judged="a sweep is reproduced when its law's E, alpha and beta are identified (intervals narrower "
            "than the estimates), not identified when they are not (intervals wider than the estimates or at "
            "the fit's bounds): such a law may fit held-out cells, but no compute-optimal allocation follows "
            "from it; the IsoFLOP slices' tokens per parameter are shown beside Chinchilla's",
            untested="no scaling fit could be read",
            needed="cells spanning more decades of N and D (GPU hours rather than CPU minutes)",
        ),
        Claim(
            "induction",
            "Induction heads and in-context learning",
            "Induction heads form in a small decoder, and in-context learning appears: later tokens, with more "
            "context, are predicted better (Olsson et al. 2022).",
            "dvc.yaml `interpret@decoder` and `interpret@attn_only` (conf/interpret/: the default decoder and "
            "the same recipe without MLPs, `pretrain_probe@attn_only`; each at 10%, 30% and 100% of its "
            "pretraining): `dvc repro interpret`; and pipelines/experiments/dvc.yaml `induction@<share>` "
            "(the attention-only decoder at 2 x 128 wide, two heads of 64, constant lr 1e-3, 3,000 steps, 3 "
            "seeds, on windows of which a share repeat an earlier span, or on a sequence of random tokens "
            "repeated, the positive control; probed every 100 steps; conf/induction.yaml): "
            "`dvc repro pipelines/experiments/dvc.yaml:induction_summary`",
            sources={
                "report": "interpret/{name}/interpret.json",
                "figure": "interpret/{name}/induction.png",
                "study": "induction/summary.json",
                "study_figure": "induction/induction.png",
            },
            read=measures.induction,
            rule=_induction,
            judged="per decoder, its induction heads are reproduced when a head scores above the threshold and "
            "copies repeated text (the second copy at least {cfg.induction_gain_floor} nats below the first), "
            "refuted when none does at this training budget though the study's positive control (the "
            "attention-only decoder on random tokens that repeat, where only copying predicts them) formed a "
            "head within its budget, not identified when no control did; its in-context learning is "
            "reproduced when the ICL score's interval lies below zero, refuted when above, not distinguishable "
            "when it covers zero; in the repeated-span study, a run is reproduced when the seeds' interval of "
            "the best head's final score (the shifted score: the key s >= 0 positions after the textbook one, "
            "at two copy lengths) lies above the threshold, refuted when it lies below (not identified "
            "while no control formed a head)",
            untested="no decoder was looked into",
            needed="the study rerun at the control's width and budget (pipelines/experiments induction@*, "
            "owed): outside it, three one-seed runs of the 128-wide control each copied after a phase change "
            "(steps about 2,000, 2,100 and 1,300) through a head on a shifted key, which the textbook score, "
            "and so the study's last run, could not see (shifted score 0.62, 0.61 and 0.39 at step 3,000; "
            "docs/findings.md#interpretability-of-the-decoder); one seed of the 50% share at that width and "
            "budget formed none (0.013)",
            # the decoders `interpret` looks into (dvc.yaml: interpret@<name>), in the report's order
            keys={"decoders": {"decoder": "default decoder", "attn_only": "attention-only decoder"}},
        ),
        Claim(
            "beam",
            "Beam search beats greedy",
            "Beam search beats greedy decoding in BLEU (Vaswani et al. 2017 used beam 4).",
            "dvc.yaml `translate_eval` (conf/translate.yaml: beam sizes 1, 2, 4, 8): `dvc repro translate_eval`",
            sources={"eval": "translate/main/eval.json", "figure": "translate/main/bleu_by_beam.png"},
            read=measures.beam,
            rule=_above,
            judged="reproduced when beam {main} minus greedy BLEU (paired bootstrap) lies above zero, refuted "
            "when below, not distinguishable when it covers zero; measured {gain}",
            untested="translate_eval compared no beam with greedy (beam 1)",
            needed="a stronger translation model",
            keys={
                "bleu": r"bleu_beam(?P<b>\d+)",
                "bleu_of": "bleu_beam{b}",
                "configured": "beam_size",
                "gain": "bleu_beam{b}_vs_greedy",
            },
        ),
    ]
}
