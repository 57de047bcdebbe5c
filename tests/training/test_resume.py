"""Exact resume: a run interrupted after a checkpoint and continued ends with the curves, metrics
and weights of a run that was never interrupted, for every objective; the schedule follows the
configuration, not the checkpoint; a finished run resumed changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from helpers import entry_stage, run_with_interruptions, stage_config, tree
from lmforge.errors import ConfigError, DataError
from lmforge.training.schedules import build_scheduler

FAMILIES = {
    "encoder": ["model=bert_tiny", "objective=bert", "tokenizer=wordpiece", "objective.dupe_factor=2"],
    "roberta": ["model=bert_tiny", "objective=roberta", "tokenizer=wordpiece", "model.dropout=0.1"],
    "decoder": ["model=gpt_tiny", "objective=clm", "tokenizer=bpe", "model.dropout=0.1"],
    "encoder_decoder": ["model=t5_tiny", "objective=span_corruption", "tokenizer=bpe"],
    # the speedrun's knobs together: Muon beside AdamW, warmup-stable-decay, QK-norm, ReLU², zero-init
    # residual outputs, soft-capped logits through the fused loss, value embeddings, the embedding skip
    "decoder_speedrun": [
        "model=gpt_tiny",
        "objective=clm",
        "tokenizer=bpe",
        "optim.algorithm=muon",
        "optim.schedule=wsd",
        "model.qk_norm=true",
        "model.activation=relu2",
        "model.zero_init_residual=true",
        "model.logit_softcap=15.0",
        "model.value_embeddings=1",
        "model.embedding_skip=true",
        "objective.loss_chunk=64",
    ],
}
# 14 steps over a few short epochs, validation every 4, last.ckpt every 3 (at 12 after validation):
# interruptions land mid-epoch and between checkpoints.
RUN = [
    "trainer.max_steps=14",
    "trainer.val_check_interval=4",
    "train.checkpoint_every=3",
    "optim.warmup_steps=2",
]


def _files(name: str) -> dict[str, str]:
    reports = Path("reports/pretrain") / name
    return {f: (reports / f).read_text() for f in ("train_loss.csv", "val_loss.csv")}


def _weights(name: str) -> dict[str, torch.Tensor]:
    return torch.load(Path("artifacts/pretrain") / name / "last.ckpt", weights_only=True)["state_dict"]


def _same_metrics(a: dict, b: dict) -> None:
    for key in ("best_val_loss", "best_val_step", "steps", "tokens_seen", "params_total"):
        assert a[key] == pytest.approx(b[key], rel=1e-6), key


@pytest.mark.parametrize("family", FAMILIES)
def test_interrupted_runs_end_exactly_like_an_uninterrupted_one(in_workspace, family, monkeypatch):
    whole = entry_stage("pretrain")(stage_config(*FAMILIES[family], *RUN, f"run_name={family}-whole")).metrics

    name = f"{family}-cut"
    cfg = stage_config(*FAMILIES[family], *RUN, f"run_name={name}")
    # Die at 7 (last.ckpt at 6, mid-epoch), at 13 (last.ckpt at 12, written after validation), then
    # finish; each session starts where the previous one's last checkpoint was (resume=auto).
    stops = ((7, 0), (13, 6), (None, 12))
    resumed = run_with_interruptions(monkeypatch, entry_stage("pretrain"), cfg, stops, total_steps=14).metrics

    _same_metrics(resumed, whole)
    assert _files(name) == _files(f"{family}-whole")
    for key, value in _weights(f"{family}-whole").items():
        torch.testing.assert_close(_weights(name)[key], value, rtol=1e-5, atol=1e-6, msg=key)
    if family == "decoder_speedrun":  # Muon's momentum and AdamW's moments, both in the checkpoint
        last = torch.load(Path("artifacts/pretrain") / name / "last.ckpt", weights_only=True)
        kinds = {frozenset(v) for v in last["optimizer_states"][0]["state"].values()}
        assert {frozenset({"momentum_buffer"}), frozenset({"step", "exp_avg", "exp_avg_sq"})} <= kinds


def test_resuming_a_finished_run_rewrites_the_same_record(in_workspace):
    cfg = stage_config(*FAMILIES["decoder"], *RUN, "run_name=finished")
    first = entry_stage("pretrain")(cfg).metrics
    files = _files("finished")
    again = entry_stage("pretrain")(
        stage_config(*FAMILIES["decoder"], *RUN, "run_name=finished", "train.resume=true")
    )
    _same_metrics(again.metrics, first)
    assert _files("finished") == files
    assert (
        json.loads(Path("reports/pretrain/finished/metrics.json").read_text())["tokens_seen"]
        == first["tokens_seen"]
    )


def test_more_steps_extend_a_finished_run_under_a_new_name(in_workspace):
    base = [*FAMILIES["decoder"], "trainer.val_check_interval=4", "optim.warmup_steps=2"]
    short = [*base, "run_name=short", "trainer.max_steps=8"]
    first = entry_stage("pretrain")(stage_config(*short)).metrics
    before = tree("artifacts/pretrain/short", "reports/pretrain/short")
    # More steps of the same folder are refused, naming what changed: its outputs describe its config.
    with pytest.raises(ConfigError, match=r"train.resume=true: .* trainer.max_steps; .*extend_from"):
        entry_stage("pretrain")(
            stage_config(*base, "run_name=short", "trainer.max_steps=12", "train.resume=true")
        )
    extend = ["run_name=longer", "trainer.max_steps=12", "train.extend_from=artifacts/pretrain/short"]
    longer = entry_stage("pretrain")(stage_config(*base, *extend)).metrics
    assert longer["steps"] == 12 and longer["tokens_seen"] == 12 * 8 * 64  # smoke: batch 8 x 64 tokens
    # The extension continues the short run's curve and keeps its best checkpoint until it improves.
    short_curve = Path("reports/pretrain/short/train_loss.csv").read_text().splitlines()
    assert (
        Path("reports/pretrain/longer/train_loss.csv").read_text().splitlines()[: len(short_curve)]
        == short_curve
    )
    assert Path("artifacts/pretrain/longer/best.ckpt").is_file()
    assert longer["best_val_loss"] <= first["best_val_loss"]
    # The short run is untouched, and its own config still reports its own steps.
    assert tree("artifacts/pretrain/short", "reports/pretrain/short") == before
    again = entry_stage("pretrain")(stage_config(*short)).metrics
    _same_metrics(again, first)
    assert again["steps"] == 8
    # A config change means another run: false starts over and differs from the extension.
    fresh = entry_stage("pretrain")(
        stage_config(*base, "run_name=fresh", "trainer.max_steps=12", "train.resume=false")
    ).metrics
    assert fresh["steps"] == 12 and fresh["best_val_loss"] != longer["best_val_loss"]


def test_extend_from_a_folder_without_a_run_says_so(in_workspace):
    cfg = stage_config(
        *FAMILIES["decoder"], *RUN, "run_name=orphan", "train.extend_from=artifacts/pretrain/nowhere"
    )
    with pytest.raises(
        DataError, match=r"train.extend_from: artifacts/pretrain/nowhere/last.ckpt does not exist"
    ):
        entry_stage("pretrain")(cfg)


def test_the_schedule_comes_from_the_config_and_only_the_step_from_the_checkpoint():
    def scheduler(total):
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        return build_scheduler(optimizer, "cosine", 2, total, min_lr_ratio=0.0)

    short = scheduler(8)
    for _ in range(6):
        short.optimizer.step()
        short.step()
    state = short.state_dict()
    assert "lr_lambdas" not in state
    longer = scheduler(100)
    longer.load_state_dict(state)
    assert longer.last_epoch == 6 and longer.lr_lambdas[0].total_steps == 100
    longer.optimizer.step()
    longer.step()
    assert longer.get_last_lr()[0] == pytest.approx(longer.lr_lambdas[0](7))
    assert longer.get_last_lr()[0] > 0.9  # the 8-step cosine would be near its floor by now


def test_resume_true_without_a_checkpoint_says_so(in_workspace):
    cfg = stage_config(*FAMILIES["decoder"], *RUN, "run_name=nothing-here", "train.resume=true")
    with pytest.raises(DataError, match=r"train.resume=true but .*last.ckpt does not exist"):
        entry_stage("pretrain")(cfg)
