"""Checkpoints are safe to load: a file whose unpickling would run a command is refused (as
best.ckpt for evaluation and as last.ckpt for resume), and empty, truncated, random, foreign and
other-architecture files are one line naming the file and what was expected."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from helpers import entry_stage, stage_config
from lmforge.errors import ConfigError, DataError
from lmforge.training.checkpoints import load_module, read_checkpoint

DECODER = [
    "model=gpt_tiny",
    "objective=clm",
    "tokenizer=bpe",
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "optim.warmup_steps=2",
]


class Exploit:
    """Unpickling this calls os.system: what a hostile checkpoint would do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _malicious(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": {}, "hyper_parameters": Exploit(marker)}, path)


def _one_line(err: pytest.ExceptionInfo, *needles: str) -> None:
    message = str(err.value)
    assert "\n" not in message and all(n in message for n in needles), message


def test_a_malicious_best_checkpoint_is_refused_by_evaluate(in_workspace, tmp_path):
    marker = tmp_path / "pwned"
    _malicious(Path("artifacts/pretrain/hostile/best.ckpt"), marker)
    with pytest.raises(DataError) as err:
        entry_stage("evaluate")(stage_config(*DECODER, "run_name=hostile"))
    _one_line(err, "artifacts/pretrain/hostile/best.ckpt", "(global posix.system), refused unread")
    assert "weights_only=False" not in str(err.value) and "weights_only` set to `False" not in str(err.value)
    assert not marker.exists()


def test_a_malicious_last_checkpoint_is_refused_on_resume(in_workspace, tmp_path):
    marker = tmp_path / "pwned"
    _malicious(Path("artifacts/pretrain/hostile2/last.ckpt"), marker)
    with pytest.raises(DataError) as err:
        entry_stage("pretrain")(stage_config(*DECODER, "run_name=hostile2", "train.resume=true"))
    _one_line(err, "last.ckpt", "(global posix.system), refused unread")
    assert "False" not in str(err.value)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "unreadable"),
        (b"\x00\x01garbage" * 100, "unreadable"),
        ("truncated", "unreadable"),
        ("foreign", "has no 'state_dict'"),
    ],
)
def test_broken_checkpoints_are_one_line(tmp_path, content, needle):
    path = tmp_path / "x.ckpt"
    if content == "truncated":
        torch.save({"state_dict": {"w": torch.randn(1000)}, "hyper_parameters": {}}, path)
        path.write_bytes(path.read_bytes()[:500])
    elif content == "foreign":
        torch.save({"weights": torch.zeros(2)}, path)
    else:
        path.write_bytes(content)
    with pytest.raises(DataError) as err:
        read_checkpoint(path)
    _one_line(err, str(path), needle, "expected a checkpoint written by the lmforge pretrain stage")


@pytest.mark.parametrize(
    ("hparams", "needle"),
    [
        ({"model": {}, "objective": {}, "optim": {}}, "hyperparameters lack max_steps"),
        ({"model": {"n_layers": -1}, "objective": {}, "optim": {}, "max_steps": 1}, "model.n_layers"),
        ({"model": {}, "objective": {"kind": "lm"}, "optim": {}, "max_steps": 1}, "objective.kind"),
    ],
)
def test_hyperparameters_that_build_no_model_are_one_line(tmp_path, hparams, needle):
    path = tmp_path / "x.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": hparams}, path)
    with pytest.raises(DataError) as err:
        load_module(path)
    _one_line(err, str(path), "hyperparameters that build no model", needle)


def test_weights_of_another_architecture_are_refused(in_workspace):
    entry_stage("pretrain")(stage_config(*DECODER, "run_name=arch"))
    path = Path("artifacts/pretrain/arch/best.ckpt")
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["hyper_parameters"]["model"]["n_layers"] = 2  # the weights hold 4 layers
    torch.save(checkpoint, path)
    with pytest.raises(DataError) as err:
        load_module(path)
    _one_line(err, str(path), "another architecture")
    # Resuming with another model config is refused before any checkpoint is read: the folder's
    # outputs describe its own config.
    with pytest.raises(ConfigError) as err:
        entry_stage("pretrain")(
            stage_config(*DECODER, "run_name=arch", "train.resume=true", "model.n_layers=2")
        )
    _one_line(err, "train.resume=true", "model.n_layers")
    # A last.ckpt whose weights do not fit the configured model is refused in one line.
    last = Path("artifacts/pretrain/arch/last.ckpt")
    state = torch.load(last, weights_only=True)
    state["state_dict"] = {k: v for k, v in state["state_dict"].items() if ".3." not in k}  # drop a layer
    torch.save(state, last)
    with pytest.raises(DataError) as err:
        entry_stage("pretrain")(stage_config(*DECODER, "run_name=arch", "train.resume=true"))
    _one_line(err, "last.ckpt", "another architecture")
