"""Bad values for the pretrain and evaluate stages, through `execute` as the entry points run them:
one line on stderr naming the key and what was expected, exit status 2, no traceback, earlier
outputs intact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pipelines
from helpers import stage_config
from lmforge.door import execute

ROOT = Path(__file__).resolve().parents[2]
DECODER = ["model=gpt_tiny", "objective=clm", "tokenizer=bpe", "logger=none"]


def _stage(script: str):
    return pipelines.stage(script)


def _fails(capsys, script: str, *overrides: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        execute(_stage(script), stage_config(*DECODER, *overrides))
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and err.startswith("error: ") and "\n" not in err, err
    return err


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("trainer.precision=bogus", "trainer.precision: got 'bogus', expected one of 32-true"),
        ("trainer.val_check_interval=0", "trainer.val_check_interval: got 0, expected an integer >= 1"),
        ("trainer.accumulate_grad_batches=0", "trainer.accumulate_grad_batches: got 0"),
        ("trainer.devices=0", "trainer.devices: got 0"),
        ("seed=abc", "seed: got 'abc', expected an integer"),
        ("train.resume=maybe", "train.resume: got 'maybe', expected true, false or auto"),
        ("model.n_kv_heads=3", "model.n_kv_heads: got 3, expected a divisor of n_heads=4"),
        ("run_name=a/b", "run_name: got 'a/b'"),
    ],
)
def test_pretrain_rejects_bad_values_at_the_door(in_workspace, capsys, override, needle):
    assert needle in _fails(capsys, "pretrain", override)


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("eval.max_batches=-1", "eval.max_batches: got -1, expected null or an integer >= 1"),
        ("eval.samples.top_p=1.5", "eval.samples.top_p: got 1.5"),
        ("seed=abc", "seed: got 'abc'"),
    ],
)
def test_evaluate_rejects_bad_values_at_the_door(in_workspace, capsys, override, needle):
    assert needle in _fails(capsys, "evaluate", "run_name=never", override)


def test_a_truncated_token_array_is_one_line(in_workspace, capsys, tmp_path):
    encoded = Path("data/encoded/bpe")
    broken = tmp_path / "bpe"
    broken.mkdir()
    for f in encoded.iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    data = (broken / "train.bin").read_bytes()
    (broken / "train.bin").write_bytes(data[: len(data) // 2 + 1])  # half, and an odd byte count
    err = _fails(capsys, "pretrain", f"tokenizer.encoded_dir={tmp_path}", "run_name=truncated")
    assert "train" in err and str(broken) in err
    assert np.fromfile(encoded / "train.bin", dtype=np.uint16).size > 0  # the real data untouched
