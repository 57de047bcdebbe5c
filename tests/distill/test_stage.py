"""The distill stage on the tiny workspace: a student distilled from a pretrained teacher is a
pretrain checkpoint (evaluation and fine-tuning read it as they are), the control trains without
its teacher, an interrupted distillation resumes exactly, bad input is one line before anything is
written, and the summary puts teacher, student and control side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import entry_point, entry_stage, mlflow_runs, run_with_interruptions, stage_config, val_loss
from lmforge.distill import summary
from lmforge.errors import ConfigError
from lmforge.evaluation import evaluate
from lmforge.training.checkpoints import load_module

ROOT = Path(__file__).resolve().parents[2]
TEACHER = [
    "model=bert_tiny",
    "objective=bert",
    "tokenizer=wordpiece",
    "trainer.max_steps=8",
    "trainer.val_check_interval=4",
    "optim.warmup_steps=2",
    "run_name=distill-teacher",
]
STUDENT = [
    "tokenizer=wordpiece",
    "distill.backbone=distill-teacher",
    "trainer.max_steps=6",
    "trainer.val_check_interval=3",
    "train.checkpoint_every=2",
    "optim.warmup_steps=2",
]


@pytest.fixture(scope="module")
def teacher(workspace) -> Path:
    """A 4-layer BERT (MLM + NSP) pretrained for 8 steps in the shared workspace."""
    previous = os.getcwd()
    os.chdir(workspace)
    try:
        entry_stage("pretrain")(stage_config(*TEACHER))
    finally:
        os.chdir(previous)
    return workspace / "artifacts/pretrain/distill-teacher/best.ckpt"


def test_a_student_is_a_pretrain_checkpoint_of_half_the_teacher(teacher, in_workspace):
    result = entry_stage("distill")(stage_config(*STUDENT, "run_name=student"))
    assert result.metrics["steps"] == 6 and result.metrics["best_val_loss"] > 0
    student, parent = load_module("artifacts/distill/student/best.ckpt"), load_module(teacher)
    assert type(student).__name__ == "PretrainModule"  # read as any pretrained model is
    assert student.model_config.n_layers == 2 and parent.model_config.n_layers == 4
    assert student.model_config.to_dict() == {**parent.model_config.to_dict(), "n_layers": 2}
    assert student.hparams.objective == parent.hparams.objective  # MLM + NSP, as the teacher learnt
    made = json.loads(Path("reports/distill/runs/student/run.json").read_text())
    assert made["layer_map"] == [0, 2] and made["teacher_layers"] == 4 and made["init"] == "teacher"
    curve = Path("reports/distill/runs/student/val_loss.csv").read_text().splitlines()
    assert len(curve) == 3  # header + validations at steps 3 and 6
    for name in ("train_loss.csv", "metrics.json"):
        assert (Path("reports/distill/runs/student") / name).is_file()


def test_the_distilled_student_starts_near_its_teacher_and_the_control_far_from_it(teacher, in_workspace):
    """Step 0 of the student is the teacher's layers 0 and 2, so its test loss starts close to the
    teacher's; the control starts from random weights and never calls the teacher."""
    zero = ["trainer.max_steps=3", "trainer.val_check_interval=3", "optim.warmup_steps=1", "optim.lr=1e-9"]
    entry_stage("distill")(stage_config(*STUDENT, *zero, "run_name=frozen-student"))
    entry_stage("distill")(stage_config(*STUDENT, *zero, "distill=control", "run_name=frozen-control"))
    batches = list(_test_batches(teacher))
    losses = {
        name: evaluate.test_metrics(load_module(path), batches)["loss"]
        for name, path in {
            "teacher": teacher,
            "student": "artifacts/distill/frozen-student/best.ckpt",
            "control": "artifacts/distill/frozen-control/best.ckpt",
        }.items()
    }
    assert abs(losses["student"] - losses["teacher"]) < abs(losses["control"] - losses["teacher"])
    made = json.loads(Path("reports/distill/runs/frozen-control/run.json").read_text())
    assert made["init"] == "random" and made["layer_map"] is None and "no teacher term" in made["loss"]


def _test_batches(teacher: Path):
    from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
    from lmforge.training.config import train_config
    from lmforge.training.datamodule import PretrainDataModule

    module = load_module(teacher)
    cfg = stage_config(*STUDENT)
    tokenizer = load_tokenizer(Path("artifacts/tokenizers/wordpiece/tokenizer.json"))
    data = PretrainDataModule(
        "data/encoded/wordpiece",
        module.objective_config,
        train_config(cfg.train),
        special_token_ids(tokenizer),
        module.model_config.vocab_size,
        seed=cfg.seed,
    )
    return data.loader("test")


def test_an_interrupted_distillation_ends_like_an_uninterrupted_one(teacher, in_workspace, monkeypatch):
    whole = entry_stage("distill")(stage_config(*STUDENT, "run_name=whole")).metrics
    cfg = stage_config(*STUDENT, "run_name=cut")
    stops = ((5, 0), (None, 4))  # dies at 5 (last.ckpt at 4), then finishes from 4
    resumed = run_with_interruptions(monkeypatch, entry_stage("distill"), cfg, stops, total_steps=6).metrics
    for key in ("best_val_loss", "best_val_step", "steps", "tokens_seen"):
        assert resumed[key] == pytest.approx(whole[key], rel=1e-6), key
    runs = Path("reports/distill/runs")
    for name in ("train_loss.csv", "val_loss.csv"):
        assert (runs / "cut" / name).read_text() == (runs / "whole" / name).read_text()
    cut = torch.load("artifacts/distill/cut/last.ckpt", weights_only=True)["state_dict"]
    for key, value in torch.load("artifacts/distill/whole/last.ckpt", weights_only=True)[
        "state_dict"
    ].items():
        torch.testing.assert_close(cut[key], value, rtol=1e-5, atol=1e-6, msg=key)


@pytest.mark.parametrize(
    "override, needle",
    [
        (
            "distill.layer_map=[0,9]",
            r"distill.layer_map: got index 9 in \[0, 9\], expected teacher layers 0..3",
        ),
        ("distill.student_layers=6", r"distill.student_layers: got 6, expected at most the teacher's 4"),
        (
            "tokenizer=bpe",
            r"tokenizer: got .*bpe/tokenizer.json \(vocab_size=\d+, pad id \d+\), expected the model's",
        ),
        (
            "+distill.student.d_model=64",
            r"distill.student.d_model: got 64, expected the teacher's 128 with init=teacher",
        ),
        (
            "+distill.student.d_model=64 distill.init=random",
            r"distill.alpha_cos: got 1.0 with student width 64 and teacher width 128, expected 0",
        ),
    ],
)
def test_bad_input_is_one_line_before_anything_is_written(teacher, in_workspace, override, needle):
    with pytest.raises(ConfigError, match=needle):
        entry_stage("distill")(stage_config(*STUDENT, *override.split(), "run_name=refused"))
    assert (
        not Path("artifacts/distill/refused").exists() and not Path("reports/distill/runs/refused").exists()
    )


@pytest.mark.slow
def test_the_entry_point_refuses_in_one_line_and_keeps_earlier_outputs(teacher, workspace):
    base = ["logger=none", "data=local", "data.local.path=corpus", *STUDENT, "run_name=kept"]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}

    def distill(*args):
        command = [sys.executable, str(ROOT / "pipelines/distill.py"), "experiment=smoke", *base, *args]
        return subprocess.run(command, cwd=workspace, capture_output=True, text=True, timeout=600, env=env)

    assert distill().returncode == 0
    best = workspace / "artifacts/distill/kept/best.ckpt"
    before = best.read_bytes()
    for bad in ("distill.temperature=0", "distill.alpha_ce=0 distill.alpha_task=0 distill.alpha_cos=0"):
        refused = distill(*bad.split())
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert refused.stderr.startswith("error: distill.")
    assert best.read_bytes() == before


def test_the_summary_sets_teacher_student_and_control_side_by_side(
    teacher, in_workspace, tmp_path, monkeypatch
):
    for variant in ("student", "control"):
        entry_stage("distill")(
            stage_config(
                *STUDENT,
                f"distill={'default' if variant == 'student' else 'control'}",
                f"run_name=fam-{variant}",
            )
        )
    teacher_dir = tmp_path / "pretrain" / "fam"
    teacher_dir.mkdir(parents=True)
    (teacher_dir / "best.ckpt").symlink_to(teacher)
    # per seed; the teacher's row ran a third seed the others did not: it is left out of every number
    scores = {
        "teacher": [0.80, 0.80, 0.10],
        "scratch": [0.70, 0.75],  # the teacher's architecture from random weights
        "student": [0.74, 0.70],
        "control": [0.62, 0.58],
    }
    folders = {
        "teacher": tmp_path / "finetune" / "fam-sentiment",
        "scratch": tmp_path / "finetune" / "scratch-sentiment",
        "student": tmp_path / "rows" / "fam-student-sentiment",
        "control": tmp_path / "rows" / "fam-control-sentiment",
    }
    for role, per_seed in scores.items():
        folder = folders[role]
        folder.mkdir(parents=True)
        run = {"metrics": ["accuracy", "macro_f1"], "seeds": list(range(len(per_seed)))}
        run["test_per_seed"] = {"accuracy": per_seed, "macro_f1": [0.1] * len(per_seed)}
        (folder / "run.json").write_text(json.dumps(run))
        mean = sum(per_seed) / len(per_seed)
        (folder / "metrics.json").write_text(json.dumps({"test_accuracy": mean, "test_macro_f1": 0.1}))
    settings = summary.DistillSummaryConfig(
        families=["fam"],
        tokenizers={"fam": "wordpiece"},
        models_dir=str(tmp_path / "pretrain"),
        teacher_rows=str(tmp_path / "finetune"),
        student_rows=str(tmp_path / "rows"),
        out_dir=str(tmp_path / "out"),
        scratch_rows={"fam": "scratch"},
        latency_batches=[1, 2],
        latency_repeats=2,
    )
    reads = {**summary.DistillSummaryPlan.reads(), "distill_summary": lambda values: settings}
    monkeypatch.setattr(summary.DistillSummaryPlan, "reads", classmethod(lambda cls: reads))
    cfg = stage_config("run_name=summary")
    result = entry_stage("distill_summary")(cfg)
    written = json.loads((tmp_path / "out" / "summary.json").read_text())["fam"]
    assert written["student"]["retention"]["sentiment"] == pytest.approx(0.72 / 0.80)
    assert written["control"]["retention"]["mean"] == pytest.approx(0.60 / 0.80)
    assert written["student"]["layers"] == 2 and written["teacher"]["layers"] == 4
    assert written["student"]["params"] < written["teacher"]["params"]
    clock = json.loads((tmp_path / "out" / "summary.json.timings.json").read_text())["latency_ms"]["fam"]
    assert all(clock[role]["b2"] > 0 for role in summary.ROLES)  # latency: in the timings file alone
    assert not any(key.startswith("latency") for role in summary.ROLES for key in written[role])
    assert written["teacher"]["downstream"]["sentiment"] == pytest.approx(0.80)  # seeds 0 and 1 only
    difference = written["student_minus_control"]["sentiment"]
    assert difference["mean"] == pytest.approx(0.12) and difference["n"] == 2
    assert difference["low"] == pytest.approx(0.12) and difference["verdict"] == "student higher"  # sd 0
    table = (tmp_path / "out" / "summary.md").read_text().splitlines()
    assert "accuracy 72.0 (90%)" in table[3] and "75.0%" in table[4]
    # +10 and +5 points: the t interval with one degree of freedom is wide (12.7 x sd / sqrt 2)
    gap = written["teacher_minus_scratch"]["sentiment"]
    assert gap["mean"] == pytest.approx(0.075) and gap["verdict"] == "not distinguishable"
    assert written["student_retention"]["sentiment"]["mean"] == pytest.approx(0.9)
    assert table[-1] == (
        "| fam | sentiment | +7.5 [-24.3, +39.3] | 90.0% [58.2%, 121.8%] | 75.0% [43.2%, 106.8%] "
        "| +12.0 [+12.0, +12.0], student higher | 2 | the teacher is not shown to beat "
        "scratch (not distinguishable), so retention measures nothing; distillation beats training the "
        "student alone on the same tokens. |"
    )
    assert result.metrics["fam/student/retention/sentiment"] == pytest.approx(0.9)


@pytest.mark.slow
def test_ddp_on_two_cpu_processes_distils_and_logs_once(teacher, workspace):
    uri = f"sqlite:///{workspace}/distill-ddp.db"
    args = ["experiment=smoke", "data=local", "data.local.path=corpus", *STUDENT, "trainer=ddp_cpu"]
    result = entry_point(
        "distill.py", *args, "run_name=ddp-student", cwd=workspace, env={"MLFLOW_TRACKING_URI": uri}
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "steps: 6" in result.stdout
    student = load_module(workspace / "artifacts/distill/ddp-student/best.ckpt")
    assert student.model_config.n_layers == 2
    runs = mlflow_runs(uri)
    assert len(runs) == 1  # rank zero only
    assert runs.iloc[0]["params.trainer.strategy"] == "ddp" and val_loss(runs.iloc[0]) > 0


@pytest.mark.parametrize(
    "values, needle",
    [
        ({"families": []}, r"distill_summary.families: got none, expected one family or more"),
        (
            {"families": ["encoder", "t5"]},
            r"distill_summary.families: 't5' has no tokenizer, expected one of \['decoder', 'encoder'\]",
        ),
    ],
)
def test_the_summary_refuses_a_family_it_cannot_measure(values, needle):
    with pytest.raises(ConfigError, match=needle):
        summary.DistillSummaryConfig(**values)
