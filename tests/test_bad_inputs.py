"""Bad input at every stage door: one `error:` line naming the key, exit status 2, and the output
tree byte for byte as it was, an interrupted run's last.ckpt included.

Values are checked when a stage starts (each group's schema, then the rules across groups such as a
schedule that fits the run), and a run touches its folder only once everything it needs is built,
so no bad value can cost the run it was meant to continue. Hydra's own refusals (an unknown preset,
row or key, a `+key` no stage reads, a malformed override) go through the entry point's `cli`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import entry_stage, fails_in_one_line, run_with_interruptions, stage_config, tree

ROOT = Path(__file__).resolve().parents[1]
OUTPUTS = ("data", "artifacts", "reports")  # every folder a stage writes
VICTIM = ["model=gpt_tiny", "objective=clm", "tokenizer=bpe", "run_name=victim"]
# 12 steps, cosine after 2 warmup steps, last.ckpt every 2: the run below dies at step 5 (last.ckpt at 4)
RUN = [
    "trainer.max_steps=12",
    "trainer.val_check_interval=4",
    "train.checkpoint_every=2",
    "optim.warmup_steps=2",
]


@pytest.fixture(scope="module")
def interrupted(workspace):
    """The shared workspace with a pretrain run killed at step 5, its last.ckpt at step 4."""
    previous = os.getcwd()
    os.chdir(workspace)
    monkeypatch = pytest.MonkeyPatch()
    try:
        run_with_interruptions(
            monkeypatch, entry_stage("pretrain"), stage_config(*VICTIM, *RUN), ((5, 0),), total_steps=12
        )
    finally:
        monkeypatch.undo()
        os.chdir(previous)
    assert (workspace / "artifacts/pretrain/victim/last.ckpt").is_file()
    return workspace


# (stage, overrides, the key the one line must name)
BAD = [
    ("pretrain", ["optim.lr=-1"], "optim.lr"),
    ("pretrain", ["optim.lr=0"], "optim.lr"),
    ("pretrain", ["optim.betas=[0.9,1.0]"], "optim.betas"),
    ("pretrain", ["optim.betas=[-0.1,0.9]"], "optim.betas"),
    ("pretrain", ["optim.betas=[0.9]"], "optim.betas"),
    ("pretrain", ["optim.eps=0"], "optim.eps"),
    ("pretrain", ["optim.weight_decay=-1"], "optim.weight_decay"),
    ("pretrain", ["optim.warmup_steps=-1"], "optim.warmup_steps"),
    ("pretrain", ["optim.schedule=exponential"], "optim.schedule"),
    ("pretrain", ["optim.min_lr_ratio=2"], "optim.min_lr_ratio"),
    ("pretrain", ["optim.warmup_steps=12"], "trainer.max_steps"),  # cosine needs steps after warmup
    ("pretrain", ["optim=noam", "optim.warmup_steps=0"], "optim.warmup_steps"),
    ("pretrain", ["trainer.max_steps=0"], "trainer.max_steps"),
    ("pretrain", ["trainer.precision=8-bit"], "trainer.precision"),
    ("pretrain", ["trainer.devices=0"], "trainer.devices"),
    ("pretrain", ["trainer.strategy=nonsense"], "trainer.strategy"),  # refused by Lightning itself
    ("pretrain", ["trainer.gradient_clip_val=-1"], "trainer.gradient_clip_val"),
    ("pretrain", ["train.batch_size=0"], "train.batch_size"),
    ("pretrain", ["train.seq_len=100000"], "train.seq_len"),
    ("pretrain", ["train.resume=maybe"], "train.resume"),
    ("pretrain", ["train.resume=true", "trainer.max_steps=20"], "trainer.max_steps"),
    ("pretrain", ["train.extend_from=artifacts/pretrain/victim"], "train.extend_from"),
    ("pretrain", ["train.extend_from=artifacts/pretrain/nowhere"], "train.extend_from"),
    ("pretrain", ["model.n_heads=5"], "model"),
    ("pretrain", ["model=bert_tiny"], "model.family"),  # an encoder under the clm objective
    ("pretrain", ["objective=bert", "objective.mlm_probability=1.5"], "objective.mlm_probability"),
    ("pretrain", ["seed=abc"], "seed"),
    ("pretrain", ["run_name=a/b"], "run_name"),
    ("distill", ["optim.lr=-1"], "optim.lr"),
    ("distill", ["optim.warmup_steps=100"], "trainer.max_steps"),
    ("finetune", ["finetune.optim.lr=-1"], "finetune: optim.lr"),
    ("finetune", ["finetune.warmup_ratio=1.0"], "finetune.warmup_ratio"),
    ("finetune", ["task=paraphrase", "task.positive_label=yes"], "task.positive_label"),
    ("finetune", ["task=pos", "task.truncation=head_tail"], "task.truncation"),
    ("finetune", ["task=pos", "task.metrics=[entity_f1]"], "task.labels"),  # universal tags are not BIO
    ("finetune", ["finetune.optim.schedule=bogus"], "finetune: optim.schedule"),
    ("finetune", ["finetune.optim.weight_decay=-0.5"], "finetune: optim.weight_decay"),
    ("prepare", ["data.val_fraction=1.5"], "data.val_fraction"),
]


@pytest.mark.parametrize(("script", "overrides", "key"), BAD, ids=[" ".join(o) for _, o, _ in BAD])
def test_a_bad_value_fails_in_one_line_and_touches_nothing(
    interrupted, monkeypatch, capsys, script, overrides, key
):
    monkeypatch.chdir(interrupted)
    before = tree(*(interrupted / f for f in OUTPUTS))
    base = [*VICTIM, *RUN] if script == "pretrain" else ["run_name=victim-" + script]
    err = fails_in_one_line(capsys, entry_stage(script), stage_config(*base, *overrides))
    assert key in err, err
    assert tree(*(interrupted / f for f in OUTPUTS)) == before


def test_the_interrupted_run_still_continues_after_the_bad_ones(interrupted, monkeypatch):
    monkeypatch.chdir(interrupted)
    resumed = entry_stage("pretrain")(stage_config(*VICTIM, *RUN)).metrics
    assert resumed["steps"] == 12


# Hydra's refusals, through the entry point (prepare: the lightest stage to import).
COMPOSITION = [
    (["model=foo"], "model=foo: no such preset, expected one of alibi_tiny"),
    (["row=nope"], "row=nope: no such preset, expected one of decoder-sentiment"),
    (["experiment=nope"], "experiment=nope: no such preset, expected one of default, scaling_full, smoke"),
    (["foo=1"], "Could not override 'foo'"),
    (["data.nonsense=1"], "Could not override 'data.nonsense'"),
    (["+foo=1"], "+foo=1: stage prepare never reads 'foo'"),
    (["++model.d_model=8"], "never reads 'model.d_model'"),
    (["data.val_fraction=["], "data.val_fraction=["),
]

# A key of a group the stage reads but decides itself is refused, not ignored (Stage.decided)
DECIDED = [
    ("finetune", ["trainer.max_steps=50"], "decides 'trainer.max_steps' itself, from finetune.max_steps"),
    ("finetune", ["trainer.val_check_interval=5"], "from finetune.val_every"),
    ("scaling_sweep", ["trainer.max_steps=50"], "from the cell's token budget"),
]


@pytest.mark.parametrize(
    ("script", "overrides", "needle"), DECIDED, ids=[f"{s} {o[0]}" for s, o, _ in DECIDED]
)
def test_a_key_the_stage_decides_itself_is_refused_not_ignored(tmp_path, script, overrides, needle):
    refused_in_one_config_line(tmp_path, script, overrides, needle)


@pytest.mark.parametrize(("overrides", "needle"), COMPOSITION, ids=[" ".join(o) for o, _ in COMPOSITION])
def test_hydra_refusals_are_one_line_with_exit_2(tmp_path, overrides, needle):
    refused_in_one_config_line(tmp_path, "prepare", overrides, needle)


def refused_in_one_config_line(tmp_path, script: str, overrides: list[str], needle: str) -> None:
    """`pipelines/<script>.py` with `overrides` in an empty folder: exit 2, one `error: config:` line
    holding `needle`, nothing written."""
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    env.pop("HYDRA_FULL_ERROR", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / f"pipelines/{script}.py"), "logger=none", *overrides],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    err = done.stderr.strip()
    assert done.returncode == 2 and err.startswith("error: config: ") and "\n" not in err, err
    assert needle in err, err
    assert not any(tmp_path.iterdir())  # nothing written
