"""The pretrain and evaluate stages on a tiny workspace: every family trains, checkpoints rebuild
themselves, evaluation reports beside a baseline; bad config values fail in one line and leave
earlier outputs intact; bf16-mixed, DDP over two CPU processes and Hydra multirun work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from helpers import entry_point, entry_stage, stage_config, val_loss
from lmforge.errors import ConfigError
from lmforge.training.checkpoints import load_module

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = {
    "encoder": ["model=bert_tiny", "objective=bert", "tokenizer=wordpiece"],
    "roberta": ["model=bert_tiny", "objective=roberta", "tokenizer=wordpiece"],
    "decoder": ["model=llama_tiny", "objective=clm", "tokenizer=bpe"],
    "encoder_decoder": ["model=t5_tiny", "objective=span_corruption", "tokenizer=bpe"],
}
SHORT = [
    "trainer.max_steps=8",
    "trainer.val_check_interval=4",
    "optim.warmup_steps=2",
]


@pytest.mark.parametrize("family", FAMILIES)
def test_pretrain_then_evaluate(in_workspace, family):
    cfg = stage_config(*FAMILIES[family], *SHORT, f"run_name={family}")
    result = entry_stage("pretrain")(cfg)
    assert result.metrics["steps"] == 8 and result.metrics["best_val_loss"] > 0
    checkpoint = Path(f"artifacts/pretrain/{family}")
    assert (checkpoint / "best.ckpt").is_file() and (checkpoint / "last.ckpt").is_file()
    curves = Path(f"reports/pretrain/{family}")
    assert (curves / "val_loss.csv").read_text().count("\n") == 3  # header + 2 evaluations

    module = load_module(checkpoint / "best.ckpt")
    assert module.model_config.vocab_size <= 600 and module.hparams.objective["name"] == cfg.objective.name
    best = torch.load(checkpoint / "best.ckpt", weights_only=True)
    last = torch.load(checkpoint / "last.ckpt", weights_only=True)
    assert "optimizer_states" not in best and {"optimizer_states", "loops", "callbacks"} <= set(last)
    # train.keep_at [0.1, 0.3, 1.0] of 8 steps: steps 1, 2 (2.4 rounded) and 8, weights only
    assert sorted(p.name for p in checkpoint.glob("step*.ckpt")) == ["step1.ckpt", "step2.ckpt", "step8.ckpt"]
    final = torch.load(checkpoint / "step8.ckpt", weights_only=True)
    assert "optimizer_states" not in final and all(
        torch.equal(final["state_dict"][k], v) for k, v in last["state_dict"].items()
    )
    early = load_module(checkpoint / "step1.ckpt").state_dict()
    assert any(not torch.equal(early[k], v) for k, v in last["state_dict"].items())

    report = entry_stage("evaluate")(cfg).metrics
    assert report["test_n_tokens"] > 0
    assert report["loss_ratio_to_unigram"] == pytest.approx(report["test_loss"] / report["unigram_loss"])
    written = json.loads(Path(f"reports/eval/{family}.json").read_text())
    assert written["test_loss"] == pytest.approx(report["test_loss"])
    assert Path(f"reports/eval/{family}/loss.png").stat().st_size > 1000
    if family == "decoder":
        samples = json.loads(Path("reports/eval/decoder/samples.json").read_text())
        assert {s["decoding"] for s in samples} == {"greedy", "sampled"} and len(samples) == 6


def test_bf16_mixed_precision_trains_on_cpu(in_workspace):
    cfg = stage_config(*FAMILIES["decoder"], *SHORT, "trainer.precision=bf16-mixed", "run_name=bf16")
    assert torch.isfinite(torch.tensor(entry_stage("pretrain")(cfg).metrics["best_val_loss"]))


@pytest.mark.slow
def test_compiled_model_trains_and_its_checkpoint_loads_plain(in_workspace):
    cfg = stage_config(*FAMILIES["decoder"], *SHORT, "train.compile=true", "run_name=compiled")
    result = entry_stage("pretrain")(cfg)
    assert torch.isfinite(torch.tensor(result.metrics["best_val_loss"]))
    best = result.model.checkpoint  # the model MLflow logs; checkpoints are not artifacts
    assert not any("_orig_mod" in key for key in torch.load(best, weights_only=True)["state_dict"])
    load_module(best)  # rebuilds the plain model from the checkpoint


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("model.n_heads=3", "model.d_model: got 128, expected a multiple of n_heads=3"),
        ("train.batch_size=0", "train.batch_size: got 0, expected an integer >= 1"),
        ("objective.mlm_probability=2.0", "objective.mlm_probability: got 2.0, expected a value in (0, 1)"),
        (
            "objective.eval_mlm_probability=0",
            "objective.eval_mlm_probability: got 0.0, expected a value in (0, 1)",
        ),
        ("train.keep_at=[0.5,2]", "train.keep_at: got [0.5, 2.0], expected shares of max_steps in (0, 1]"),
        ("train.seq_len=4096", "train.seq_len: got 4096, expected <= model.max_seq_len=128"),
    ],
)
def test_bad_values_fail_in_one_line(in_workspace, override, needle):
    with pytest.raises(ConfigError) as info:
        entry_stage("pretrain")(stage_config(*FAMILIES["encoder"], *SHORT, override))
    assert needle in str(info.value) and "\n" not in str(info.value)


@pytest.mark.slow
def test_entry_point_error_is_one_line_and_keeps_earlier_outputs(workspace):
    base = ["experiment=smoke", "logger=none", "data=local", "data.local.path=corpus", *FAMILIES["decoder"]]
    ok = entry_point("pretrain.py", *base, *SHORT, "run_name=keep", cwd=workspace)
    assert ok.returncode == 0, ok.stderr[-2000:]
    checkpoint = workspace / "artifacts/pretrain/keep/best.ckpt"
    before = checkpoint.read_bytes()
    bad = entry_point("pretrain.py", *base, *SHORT, "run_name=keep", "trainer.max_steps=abc", cwd=workspace)
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "error: invalid config trainer.max_steps: Value 'abc' of type 'str' could not be converted to Integer"
    )
    assert checkpoint.read_bytes() == before


@pytest.mark.slow
def test_ddp_on_two_cpu_processes_logs_once(workspace):
    uri = f"sqlite:///{workspace}/ddp.db"
    base = ["experiment=smoke", "data=local", "data.local.path=corpus", *FAMILIES["decoder"], *SHORT]
    result = entry_point(
        "pretrain.py",
        *base,
        "trainer=ddp_cpu",
        "run_name=ddp",
        cwd=workspace,
        env={"MLFLOW_TRACKING_URI": uri},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "steps: 8" in result.stdout
    import mlflow

    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=["lmforge"])
    assert len(runs) == 1  # rank zero only
    assert runs.iloc[0]["params.trainer.strategy"] == "ddp" and val_loss(runs.iloc[0]) > 0


@pytest.mark.slow
def test_hydra_multirun_sweeps_models(workspace):
    base = [
        "experiment=smoke",
        "logger=none",
        "data=local",
        "data.local.path=corpus",
        "tokenizer=bpe",
        *SHORT,
    ]
    result = entry_point("pretrain.py", "--multirun", "model=gpt_tiny,mistral_tiny", *base, cwd=workspace)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("gpt_tiny-clm", "mistral_tiny-clm"):
        assert (workspace / "artifacts/pretrain" / name / "best.ckpt").is_file()
        assert json.loads((workspace / "reports/pretrain" / name / "metrics.json").read_text())["steps"] == 8
