"""The findings' rules on hand-made reports (each part's verdict moves from reproduced through not
distinguishable to refuted as its numbers cross the rule), the claim's verdict and headline from its
parts, the evidence check against the experiments' lock, and the stage on the committed reports."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir

from helpers import CONF, entry_stage
from lmforge.errors import ConfigError
from lmforge.findings.claims import CLAIMS
from lmforge.findings.config import FindingsConfig
from lmforge.findings.evidence import Evidence, MissingEvidence
from lmforge.findings.rules import (
    MIXED,
    NOT_DISTINGUISHABLE,
    NOT_IDENTIFIED,
    NOT_TESTED,
    REFUTED,
    REPRODUCED,
    VERDICTS,
    Finding,
    Interval,
    PartVerdict,
    combined,
    welch,
)

ROOT = Path(__file__).resolve().parents[2]


def workspace(tmp_path: Path, reports: dict[str, object], pinned: dict[str, str] | None = None) -> Evidence:
    """Reports under tmp/reports; `pinned`: {relative path: stage} written into a lock with their md5s."""
    root = tmp_path / "reports"
    for rel, data in reports.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
    stages = {}
    for rel, stage in (pinned or {}).items():
        path = root / rel
        md5 = hashlib.md5(path.read_bytes()).hexdigest()
        out = {"path": Path(os.path.relpath(path)).as_posix(), "md5": md5}  # as dvc.lock: from the root
        stages.setdefault(stage, {"cmd": "x", "outs": []})["outs"].append(out)
    lock = tmp_path / "dvc.lock"
    lock.write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}))
    return Evidence(root, lock)


def verdict(key: str, ev: Evidence, tmp_path: Path, **config) -> str:
    try:
        return CLAIMS[key].test(ev, FindingsConfig(**config), tmp_path / "figures").verdict
    except MissingEvidence:
        return NOT_TESTED


def comparison(diff: float, half: float, seeds: int = 3, **extra) -> dict:
    return {"difference": diff, "low": diff - half, "high": diff + half, "seeds": seeds, **extra}


def test_every_claim_of_the_issue_is_registered():
    assert set(CLAIMS) >= {
        "pretraining",
        "few_labels",
        "distillation",
        "lora",
        "warmup",
        "positions",
        "gqa",
        "kv_cache",
        "scaling",
        "induction",
        "beam",
    }


@pytest.mark.parametrize(
    "sentiment, expected",
    [((0.03, 0.01), REPRODUCED), ((0.01, 0.02), MIXED), ((-0.05, 0.01), MIXED)],
)
def test_pretraining_is_reproduced_only_when_every_task_interval_is_above_zero(tmp_path, sentiment, expected):
    summary = {
        "comparisons": {
            "encoder-pos-vs-scratch-pos": comparison(0.02, 0.01),
            "encoder-sentiment-vs-scratch-sentiment": comparison(*sentiment),
            "encoder-sentiment-lora-vs-encoder-sentiment": comparison(
                -0.5, 0.01
            ),  # not a pretraining comparison
        }
    }
    assert (
        verdict("pretraining", workspace(tmp_path, {"finetune/summary.json": summary}), tmp_path) == expected
    )


def test_pretraining_is_decided_per_task_and_budget(tmp_path):
    short = {
        "comparisons": {
            "encoder-pos-vs-scratch-pos": comparison(0.02, 0.01),  # above zero at 200 steps
            "encoder-sentiment-vs-scratch-sentiment": comparison(-0.05, 0.01),  # below
        }
    }
    converged = {
        "comparisons": {
            "encoder-pos-converged-vs-scratch-pos-converged": comparison(0.001, 0.005),  # covers zero
            # the encoder pretrained on data=large against its own scratch control: a part of its own
            "large-encoder-pos-converged-vs-large-scratch-pos-converged": comparison(0.01, 0.005),
        }
    }
    reports = {"finetune/summary.json": short, "finetune_converged/summary.json": converged}
    pinned = {"finetune_converged/summary.json": "finetune_converged"}
    ev = workspace(tmp_path, reports, pinned)
    found = CLAIMS["pretraining"].test(ev, FindingsConfig(), tmp_path / "figures")
    assert {p.name: p.verdict for p in found.parts} == {
        "pos (200 steps)": REPRODUCED,
        "sentiment (200 steps)": REFUTED,
        "pos (to convergence)": NOT_DISTINGUISHABLE,
        "pos, data=large (to convergence)": REPRODUCED,
    }
    assert found.verdict == MIXED and found.headline == (
        "reproduced: pos (200 steps), pos, data=large (to convergence); refuted: sentiment (200 steps); "
        "not distinguishable: pos (to convergence)"
    )
    assert found.parts[0].note == "pretrained - scratch +2.0 points [+1.0, +3.0]"
    # a stale converged report (not what the experiments' lock pins) is not read, and the rule says so
    (tmp_path / "reports/finetune_converged/summary.json").write_text(json.dumps({"comparisons": {}}))
    found = CLAIMS["pretraining"].test(ev, FindingsConfig(), tmp_path / "figures")
    assert [p.name for p in found.parts] == ["pos (200 steps)", "sentiment (200 steps)"]
    assert "fine-tuning to convergence not read" in found.because


def test_a_claim_s_verdict_and_headline_follow_from_its_parts():
    def finding(*verdicts: str) -> Finding:
        parts = [PartVerdict(f"p{i}", v) for i, v in enumerate(verdicts)]
        decided = {v for v in verdicts if v != NOT_TESTED}
        return Finding(decided.pop() if len(decided) == 1 else MIXED, "", parts=parts)

    assert finding(REPRODUCED).headline == REPRODUCED  # one part: the claim's verdict alone
    assert finding(REFUTED, REFUTED).headline == "refuted: p0, p1"
    assert finding(NOT_TESTED, REPRODUCED).headline == "reproduced: p1; not tested: p0"
    assert finding(NOT_IDENTIFIED, REPRODUCED).verdict == MIXED
    assert combined(REPRODUCED, REPRODUCED) == REPRODUCED
    assert combined(REPRODUCED, NOT_DISTINGUISHABLE) == NOT_DISTINGUISHABLE
    assert combined(NOT_DISTINGUISHABLE, REFUTED) == REFUTED
    assert Interval(0.5, 0.1, 0.9).against(0.0, "above") == REPRODUCED
    assert Interval(0.5, 0.1, 0.9).against(0.0, "below") == REFUTED
    assert Interval(0.5, -0.1, 0.9).against(0.0, "below") == NOT_DISTINGUISHABLE
    assert Interval(0.5, None, None).against(0.0, "above") == NOT_DISTINGUISHABLE  # no interval, no verdict
    assert Interval(0.04, 0.03, 0.045).against(0.05, "below") == REPRODUCED  # below a margin


def test_pretraining_without_its_report_is_not_tested(tmp_path):
    assert verdict("pretraining", workspace(tmp_path, {}), tmp_path) == NOT_TESTED


def lora_summary(diff: float, half: float) -> dict:
    rows = {
        "m-sentiment-lora": {"params_trainable": 2, "params_total": 100},
        "m-sentiment": {"params_trainable": 100, "params_total": 100},
    }
    return {
        "comparisons": {"m-sentiment-lora-vs-m-sentiment": comparison(diff, half, 8, margin=0.03)},
        "rows": rows,
    }


@pytest.mark.parametrize(
    "diff, half, expected",
    [(-0.01, 0.015, REPRODUCED), (-0.02, 0.02, NOT_DISTINGUISHABLE), (-0.2, 0.01, REFUTED)],
)
def test_lora_needs_its_interval_above_minus_the_margin(tmp_path, diff, half, expected):
    ev = workspace(
        tmp_path,
        {
            "finetune/summary.json": lora_summary(diff, half),
            "minilm_lora_sequential/summary.json": lora_summary(diff, half),
        },
    )
    assert verdict("lora", ev, tmp_path) == expected


def test_an_experiment_report_that_differs_from_its_lock_is_not_read(tmp_path):
    ev = workspace(
        tmp_path,
        {"finetune/learning_curves.json": {}},
        pinned={"finetune/learning_curves.json": "learning_curves"},
    )
    (tmp_path / "reports/finetune/learning_curves.json").write_text('{"changed": 1}')
    with pytest.raises(MissingEvidence, match="learning_curves"):
        ev.json("finetune/learning_curves.json")
    assert verdict("few_labels", ev, tmp_path) == NOT_TESTED


def curve(mean: float, std: float = 0.01, seeds: int = 3) -> dict:
    return {"mean": mean, "std": std, "seeds": seeds}


@pytest.mark.parametrize(
    "gap_few, gap_all, expected",
    [
        (0.10, 0.01, REPRODUCED),
        (0.01, 0.10, REFUTED),  # a lead smaller than with all labels (the intervals apart)
        (-0.05, -0.01, REFUTED),  # behind scratch with the fewest labels
        (0.10, 0.095, NOT_DISTINGUISHABLE),  # larger, but the two intervals overlap
    ],
)
def test_few_labels_needs_a_positive_gap_at_the_fewest_labels_larger_than_with_all(
    tmp_path, gap_few, gap_all, expected
):
    curves = {
        "pos": {
            "encoder-pos": {"100": curve(0.6 + gap_few), "5000": curve(0.9 + gap_all)},
            "scratch-pos": {"100": curve(0.6), "5000": curve(0.9)},
        }
    }
    ev = workspace(
        tmp_path,
        {"finetune/learning_curves.json": curves},
        pinned={"finetune/learning_curves.json": "learning_curves"},
    )
    assert verdict("few_labels", ev, tmp_path) == expected


def test_welch_interval_against_scipy_by_hand():
    d = welch(1.0, 0.1, 3, 0.5, 0.2, 4)
    assert d.mean == pytest.approx(0.5)
    # se = sqrt(0.01/3 + 0.04/4) = 0.11547; Welch-Satterthwaite df = 4.571; t_0.975(4.571) = 2.6448
    assert d.high - d.mean == pytest.approx(2.6448 * 0.11547, rel=1e-3)
    assert welch(1.0, 0.0, 1, 0.5, 0.1, 3).low is None


def distill(gap: tuple[float, float], keep: tuple[float, float], beat: tuple[float, float]) -> dict:
    def iv(m, h):
        return {"mean": m, "low": m - h, "high": m + h, "n": 3}

    return {
        "encoder": {
            "tasks": {"pos": "token_accuracy"},
            "teacher_minus_scratch": {"pos": iv(*gap)},
            "student_retention": {"pos": iv(*keep)},
            "student_minus_control": {"pos": iv(*beat)},
        }
    }


@pytest.mark.parametrize(
    "gap, keep, beat, expected",
    [
        ((0.02, 0.01), (0.99, 0.005), (0.03, 0.01), REPRODUCED),
        ((0.02, 0.01), (0.85, 0.01), (0.03, 0.01), REFUTED),  # keeps less than 90%
        ((0.02, 0.01), (0.99, 0.005), (0.0, 0.01), NOT_DISTINGUISHABLE),  # cannot tell it from its control
        ((0.02, 0.01), (0.90, 0.02), (0.03, 0.01), NOT_DISTINGUISHABLE),  # retention covers 90%
        # decided even where the teacher is no better
        ((0.00, 0.01), (0.99, 0.005), (0.03, 0.01), REPRODUCED),
        ((-0.002, 0.06), (0.994, 0.093), (0.003, 0.051), NOT_DISTINGUISHABLE),  # the default run's sentiment
    ],
)
def test_distillation_is_judged_by_its_intervals_wherever_the_teacher_stands(
    tmp_path, gap, keep, beat, expected
):
    ev = workspace(tmp_path, {"distill/summary.json": distill(gap, keep, beat)})
    assert verdict("distillation", ev, tmp_path) == expected
    found = CLAIMS["distillation"].test(ev, FindingsConfig(), tmp_path / "figures")
    weak = "the teacher does not beat scratch" in found.parts[0].note
    assert weak == (gap[0] - gap[1] <= 0)  # said exactly where the teacher's interval is not above zero


def warmup_summary(post_penalty: float, pre_penalty: float) -> dict:
    def cell(base: float, extra: float) -> dict:
        runs = {f"x-s{s}": {"final_val_loss": base + extra + 0.01 * s, "bleu": 0.1} for s in (1, 2, 3)}
        return {"bleu": 0.1, "final_val_loss": base + extra, "runs": runs}

    return {
        "post-noam": cell(4.5, 0),
        "post-constant": cell(4.5, post_penalty),
        "pre-noam": cell(4.4, 0),
        "pre-constant": cell(4.4, pre_penalty),
    }


@pytest.mark.parametrize(
    "post, pre, expected", [(1.8, 0.1, REPRODUCED), (0.1, 0.1, NOT_DISTINGUISHABLE), (0.1, 1.8, REFUTED)]
)
def test_warmup_compares_the_two_penalties_paired_by_seed(tmp_path, post, pre, expected):
    path = "translate/warmup_summary/summary.json"
    ev = workspace(tmp_path, {path: warmup_summary(post, pre)}, pinned={path: "translate_warmup"})
    assert verdict("warmup", ev, tmp_path) == expected


def arch_metrics(rope_past: float, mqa_high: float) -> dict:
    m = {
        "norms/layer/test_loss": 5.0,
        "norms/rms/test_loss": 5.01,
        "norms/rms/loss_minus_reference": 0.01,
        "norms/rms/loss_minus_reference_low": 0.0,
        "norms/rms/loss_minus_reference_high": 0.02,
    }
    # degradation past the training length, and its difference from learned positions' (0.2)
    for p, d in (("learned", 0.0), ("rope", rope_past), ("alibi", -0.25)):
        key = f"positions/{p}/degradation_minus_reference"
        m |= {f"positions/{p}/loss_128": 5.0, f"positions/{p}/degradation_512": 0.2 + d}
        m |= {
            key: d,
            f"{key}_low": d - 0.01 if p != "learned" else 0.0,
            f"{key}_high": d + 0.01 if p != "learned" else 0.0,
        }
    for k, high in ((4, 0.0), (2, 0.03), (1, mqa_high)):
        m |= {
            f"kv_heads/{k}/n_heads": 4.0,
            f"kv_heads/{k}/kv_bytes_per_token": 1024.0 * k / 4,
            f"kv_heads/{k}/kv_saving": 4.0 / k,
            f"kv_heads/{k}/test_loss": 5.0,
            f"kv_heads/{k}/loss_minus_reference": high / 2,
            f"kv_heads/{k}/loss_minus_reference_low": high / 2 - 0.01,
            f"kv_heads/{k}/loss_minus_reference_high": high,
        }
    return m


@pytest.mark.parametrize(
    "key, good, bad, verdict_bad",
    [
        ("positions", {"rope_past": -0.05}, {"rope_past": 0.1}, MIXED),  # RoPE refuted, ALiBi reproduced
        ("gqa", {"mqa_high": 0.04}, {"mqa_high": 0.08}, MIXED),  # MQA's interval covers the margin
        ("kv_cache", {"speedup": 5.0}, {"speedup": 1.1}, NOT_DISTINGUISHABLE),
        ("kv_cache", {"speedup": 5.0}, {"speedup": 0.5}, REFUTED),
        ("norms", {"step": 1.1}, {"step": 1.02}, MIXED),  # 2% faster: within timing noise
    ],
)
def test_architecture_claims_flip_when_their_numbers_cross_the_rule(tmp_path, key, good, bad, verdict_bad):
    base = {"rope_past": -0.05, "mqa_high": 0.04, "speedup": 5.0, "step": 1.1}
    for change, expected in ((good, REPRODUCED), (bad, verdict_bad)):
        folder = tmp_path / expected.replace(" ", "_")
        values = base | change
        reports = {
            "arch.json": arch_metrics(values["rope_past"], values["mqa_high"]),
            "bench/generation.json": generation_bench(values["speedup"]),
            "bench/norms.json": {"step_d64.ratio": values["step"], "op_d64.ratio": 0.4},
        }
        ev = workspace(folder, reports, pinned={"arch.json": "arch_eval"})
        assert verdict(key, ev, folder) == expected, (key, change)


def generation_bench(speedup: float) -> dict:
    """benchmarks/generation.py's keys: ours with the cache against ours without, side by side."""
    return {
        f"{model}_batch{b}_cache.{side}": value
        for model in ("gpt2", "llama")
        for b in (1, 8)
        for side, value in (("ours", 100.0 * speedup), ("peer", 100.0), ("ratio", speedup))
    }


def test_the_kv_cache_claim_reads_each_model_and_batch_of_the_benchmark_as_a_part(tmp_path):
    bench = generation_bench(5.0) | {"llama_batch1_cache.ratio": 1.1, "gpt2_batch8.ratio": 0.5}
    ev = workspace(tmp_path, {"bench/generation.json": bench})
    found = CLAIMS["kv_cache"].test(ev, FindingsConfig(), tmp_path / "figures")
    assert {p.name: p.verdict for p in found.parts} == {
        "gpt2 batch 1": REPRODUCED,
        "gpt2 batch 8": REPRODUCED,
        "llama batch 1": NOT_DISTINGUISHABLE,  # 1.1x: within host drift
        "llama batch 8": REPRODUCED,
    }  # "gpt2_batch8.ratio" is ours against Hugging Face's generate, not the cache's part


def interpret_report(heads: list[str], gain: float, icl: tuple[float, float, float]) -> dict:
    point = {"step": 1000, "icl_score": icl[0], "icl_interval": [icl[1], icl[2]]}
    return {
        "induction_heads": heads,
        "repeat_gain": gain,
        "first_copy_loss": 9.0,
        "second_copy_loss": 9.0 - gain,
        "induction_scores": [[0.5, 0.1]],
        "induction_threshold": 0.3,
        "trajectory": [point],
    }


NONE = ([], 0.0, (-0.2, -0.25, -0.15))  # in-context learning without induction heads


@pytest.mark.parametrize(
    "attn_only, heads, icl",
    [
        ((["L2H1"], 3.0, (-0.2, -0.25, -0.15)), REPRODUCED, REPRODUCED),
        (NONE, NOT_IDENTIFIED, REPRODUCED),  # ICL without induction heads, and no control run
        ((["L2H1"], 3.0, (0.0, -0.05, 0.05)), REPRODUCED, NOT_DISTINGUISHABLE),  # heads, ICL covers zero
        ((["L2H1"], 3.0, (0.1, 0.05, 0.15)), REPRODUCED, REFUTED),  # later tokens predicted worse
        ((["L2H1"], 0.1, (-0.2, -0.25, -0.15)), NOT_IDENTIFIED, REPRODUCED),  # a head that does not copy
    ],
)
def test_induction_decides_heads_and_in_context_learning_per_decoder(tmp_path, attn_only, heads, icl):
    """Without the study's positive control, a missing head is not identified: nothing showed that this
    training can form one."""
    reports = {
        "interpret/decoder/interpret.json": interpret_report(*NONE),
        "interpret/attn_only/interpret.json": interpret_report(*attn_only),
    }
    found = CLAIMS["induction"].test(workspace(tmp_path, reports), FindingsConfig(), tmp_path / "figures")
    assert {p.name: p.verdict for p in found.parts} == {
        "induction heads in the default decoder": NOT_IDENTIFIED,
        "in-context learning in the default decoder": REPRODUCED,
        "induction heads in the attention-only decoder": heads,
        "in-context learning in the attention-only decoder": icl,
    }
    assert found.verdict == MIXED
    assert "no positive control was run, so no absence here refutes" in found.parts[0].note


def study_row(value: float, score: list[float], data: str = "text", verdict: str = "") -> dict:
    return {"repeat_share": value, "seeds": [0, 1, 2], "steps": 1000, "max_induction_score": score,
            "first_step_above_threshold": {"0": None, "1": 400, "2": None}, "data": data,
            "label": f"{data} task" if data != "text" else f"{value:.0%} repeated",
            "verdict": verdict or ("forms" if score[1] > 0.3 else "does not form")}  # fmt: skip


def study_finding(tmp_path, study: dict):
    """The induction claim on two decoders without heads and the study `study`."""
    reports = {
        "interpret/decoder/interpret.json": interpret_report(*NONE),
        "interpret/attn_only/interpret.json": interpret_report(*NONE),
        "induction/summary.json": study,
    }
    ev = workspace(tmp_path, reports, pinned={"induction/summary.json": "induction_summary"})
    (tmp_path / "reports/induction/induction.png").write_bytes(b"png")
    return CLAIMS["induction"].test(ev, FindingsConfig(), tmp_path / "figures")


def test_the_repeated_span_study_adds_a_part_per_share_decided_by_the_seeds_interval(tmp_path):
    share = study_row
    study = {
        "threshold": 0.3,
        "shares": [
            share(0.0, [0.01, 0.005, 0.015]),
            share(0.2, [0.3, 0.1, 0.5]),
            share(0.5, [0.6, 0.5, 0.7]),
            share(1.0, [0.9, 0.85, 0.95], data="periodic"),  # the positive control formed a head
        ],
    }
    found = study_finding(tmp_path, study)
    shares = {p.name: p.verdict for p in found.parts if "attention-only induction heads" in p.name}
    head = "attention-only induction heads at {} repeated windows"
    assert shares == {
        head.format("0%"): REFUTED,  # the control shows this training forms heads; none formed here
        head.format("20%"): NOT_DISTINGUISHABLE,
        head.format("50%"): REPRODUCED,
        "attention-only induction heads on the periodic task": REPRODUCED,
    }
    assert "first above it at step: never, 400, never" in found.parts[-2].note
    assert found.figure.name == "induction.png" and found.figure.parent.name == "induction"
    verdicts = {p.name: p.verdict for p in found.parts}
    assert verdicts["induction heads in the default decoder"] == REFUTED  # the control formed a head


def test_without_a_control_that_formed_a_head_no_missing_head_is_refuted(tmp_path):
    study = {
        "threshold": 0.3,
        "shares": [
            study_row(0.0, [0.01, 0.005, 0.015]),
            study_row(1.0, [0.01, 0.008, 0.012], data="periodic"),  # the control: no head either
        ],
    }
    found = study_finding(tmp_path, study)
    verdicts = {p.name: p.verdict for p in found.parts}
    assert verdicts == {
        "induction heads in the default decoder": NOT_IDENTIFIED,
        "in-context learning in the default decoder": REPRODUCED,
        "induction heads in the attention-only decoder": NOT_IDENTIFIED,
        "in-context learning in the attention-only decoder": REPRODUCED,
        "attention-only induction heads at 0% repeated windows": NOT_IDENTIFIED,
        "attention-only induction heads on the periodic task": NOT_IDENTIFIED,
    }
    assert (
        "no positive control formed a head (best: periodic task, 0.010 at step 1000)" in found.parts[0].note
    )


def test_induction_is_not_tested_without_the_attention_only_report(tmp_path):
    ev = workspace(tmp_path, {"interpret/decoder/interpret.json": interpret_report(*NONE)})
    assert verdict("induction", ev, tmp_path) == NOT_TESTED


def eval_report(diff: float, low: float, high: float) -> dict:
    return {"beam_size": 4, "bleu_beam1": 8.0, "bleu_beam4": 8.0 + diff, "bleu_beam4_vs_greedy": diff,
            "bleu_beam4_vs_greedy_low": low, "bleu_beam4_vs_greedy_high": high}  # fmt: skip


@pytest.mark.parametrize(
    "interval, expected",
    [
        ((0.8, 0.2, 1.4), REPRODUCED),  # a small gain, but its interval lies above zero
        ((2.0, -0.3, 4.1), NOT_DISTINGUISHABLE),  # a large gain that the test set cannot tell from zero
        ((-0.5, -0.9, -0.1), REFUTED),
    ],
)
def test_beam_needs_the_configured_beam_s_interval_over_greedy_above_zero(tmp_path, interval, expected):
    ev = workspace(tmp_path, {"translate/main/eval.json": eval_report(*interval)})
    assert verdict("beam", ev, tmp_path) == expected


def test_beam_is_not_tested_without_a_greedy_comparison(tmp_path):
    ev = workspace(tmp_path, {"translate/main/eval.json": {"beam_size": 4, "bleu_beam4": 9.0}})
    assert verdict("beam", ev, tmp_path) == NOT_TESTED


def test_interval_display():
    assert (
        Interval(0.0123, 0.01, 0.02).show(scale=100, digits=1, suffix=" points") == "+1.2 points [+1.0, +2.0]"
    )
    assert Interval(0.5, None, None).show() == "+0.500 (no interval)"


@pytest.mark.parametrize(
    "values, needle",
    [
        ({"lora_margin": 0}, "findings.lora_margin"),
        ({"kv_speedup_floor": 0.5}, "findings.kv_speedup_floor"),
        ({"norm_speedup_floor": 0.9}, "findings.norm_speedup_floor"),
    ],
)
def test_bad_findings_values_name_the_key(values, needle):
    with pytest.raises(ConfigError, match=needle):
        FindingsConfig(**values)


def test_findings_stage_on_the_committed_reports(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the committed reports and experiments lock, read-only
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            config_name="findings", overrides=["logger=none", f"findings.out={tmp_path}/findings.md"]
        )
    result = entry_stage("findings")(cfg)
    record = json.loads((tmp_path / "findings.json").read_text())
    assert set(record["claims"]) == set(CLAIMS)
    assert all(c["verdict"] in VERDICTS for c in record["claims"].values())
    claims = {k: v for k, v in result.metrics.items() if k.startswith("claims_")}
    assert sum(claims.values()) == len(CLAIMS)
    parts = sum(len(c["parts"]) for c in record["claims"].values())
    assert sum(v for k, v in result.metrics.items() if k.startswith("parts_")) == parts
    text = (tmp_path / "findings.md").read_text()
    for claim in CLAIMS.values():
        assert claim.title in text and claim.statement in text


def test_lora_reads_the_converged_minilm_rows_and_skips_their_other_comparisons(tmp_path):
    converged = lora_summary(-0.2, 0.01)  # far below the margin: refuted
    converged["comparisons"] = {
        "m-sentiment-lora-converged-vs-m-sentiment-converged": converged["comparisons"].pop(
            "m-sentiment-lora-vs-m-sentiment"
        ),
        "encoder-pos-converged-vs-scratch-pos-converged": comparison(0.004, 0.001),  # not a LoRA claim
    }
    converged["rows"]["m-sentiment-lora-converged"] = converged["rows"].pop("m-sentiment-lora")
    shown = lora_summary(-0.01, 0.015)
    reports = {"finetune/summary.json": shown, "minilm_lora_sequential/summary.json": shown}
    assert verdict("lora", workspace(tmp_path / "a", reports), tmp_path) == REPRODUCED
    reports["finetune_converged/summary.json"] = converged
    found = CLAIMS["lora"].test(workspace(tmp_path / "b", reports), FindingsConfig(), tmp_path / "figures")
    assert found.headline == (
        "reproduced: our encoder (the row's settings), MiniLM (90 steps); refuted: MiniLM (converged)"
    )
    # the searched configuration (lora_grid_choice) is a part of its own beside the row's settings
    searched = lora_summary(-0.02, 0.005)
    searched["comparisons"] = {"e-sentiment-lora-searched-vs-e-sentiment": searched["comparisons"].pop(
        "m-sentiment-lora-vs-m-sentiment")}  # fmt: skip
    searched["rows"] = {"e-sentiment-lora-searched": {"params_trainable": 3, "params_total": 100}}
    reports["lora_grid/summary.json"] = searched
    found = CLAIMS["lora"].test(workspace(tmp_path / "c", reports), FindingsConfig(), tmp_path / "figures")
    parts = {p.name: p for p in found.parts}
    assert parts["our encoder (searched)"].verdict == REPRODUCED  # -2.0 [-2.5, -1.5]: above -3
    assert ("our encoder (searched) (e-sentiment-lora-searched - e-sentiment): trained weights", "3.0%") in (
        found.numbers
    )


def test_lora_names_a_sequential_look_and_its_level(tmp_path):
    sequential = lora_summary(-0.018, 0.011)  # -1.8 [-2.9, -0.7]: above -3 points
    sequential["comparisons"]["m-sentiment-lora-vs-m-sentiment"] |= {"level": 0.9875, "look": 2, "looks": 4}
    reports = {
        "finetune/summary.json": lora_summary(-0.2, 0.01),
        "minilm_lora_sequential/summary.json": sequential,
    }
    found = CLAIMS["lora"].test(workspace(tmp_path, reports), FindingsConfig(), tmp_path / "figures")
    parts = {p.name: p for p in found.parts}
    assert parts["MiniLM (90 steps)"].verdict == REPRODUCED
    assert parts["MiniLM (90 steps)"].note.endswith("8 seeds, 98.75% interval at look 2 of 4")
    # a fixed-seed comparison: no look
    assert parts["our encoder (the row's settings)"].note.endswith("8 seeds")


def test_norms_read_the_benchmark_s_widths_as_parts_of_their_own(tmp_path):
    bench = {"step_d64.ratio": 1.0, "op_d64.ratio": 1.3, "step_d512.ratio": 1.08, "op_d512.ratio": 1.6,
             "step_d1024.ratio": 0.9, "op_d1024.ratio": 1.5, "step_d512.ours": 900.0}  # fmt: skip
    reports = {"arch.json": arch_metrics(-0.05, 0.04), "bench/norms.json": bench}
    ev = workspace(tmp_path, reports, pinned={"arch.json": "arch_eval"})
    found = CLAIMS["norms"].test(ev, FindingsConfig(), tmp_path / "figures")
    assert {p.name: p.verdict for p in found.parts} == {
        "loss": REPRODUCED,
        "speed at 64 wide": NOT_DISTINGUISHABLE,  # 1.00x
        "speed at 512 wide": REPRODUCED,  # 1.08x >= 1.05x
        "speed at 1024 wide": REFUTED,  # 0.90x: slower by more than 1.05x
    }
    assert (
        "512 wide: RMSNorm's speed / LayerNorm's: a training step; the norm alone; compiled",
        "1.08x; 1.60x; not timed",
    ) in found.numbers
