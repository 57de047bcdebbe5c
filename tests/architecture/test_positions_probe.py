"""The positions probe (lmforge.architecture.probe): its edited tables against ones written here, and
its losses against the model's own, evaluated here with the table set by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

import lmforge.architecture.probe as probe
from helpers import CONF, entry_stage, fails_in_one_line, tiny
from lmforge.architecture.probe import variants
from lmforge.interpret.induction import token_losses
from lmforge.training.config import ObjectiveConfig, OptimConfig
from lmforge.training.module import PretrainModule

TRAINED, LENGTH = 8, 16


def test_the_tables_keep_the_trained_rows_and_edit_only_the_rest():
    table = torch.arange(12.0).reshape(6, 2)
    tables = variants(table, 4)
    assert torch.equal(tables["trained"], table)
    assert torch.equal(
        tables["zero past"], torch.tensor([[0, 1], [2, 3], [4, 5], [6, 7], [0, 0], [0, 0]]).float()
    )
    assert torch.equal(
        tables["clamped"], torch.tensor([[0, 1], [2, 3], [4, 5], [6, 7], [6, 7], [6, 7]]).float()
    )
    assert torch.equal(tables["zero all"], torch.zeros(6, 2))
    assert torch.equal(table, torch.arange(12.0).reshape(6, 2))  # the input is left as it was


def checkpoint(folder: Path, position: str) -> Path:
    torch.manual_seed(0)
    config = tiny(position=position, max_seq_len=LENGTH)
    module = PretrainModule(config, ObjectiveConfig(), OptimConfig(), max_steps=1)
    with torch.no_grad():  # trained rows unlike the untrained ones, as after pretraining
        if module.model.embeddings.pos is not None:
            module.model.embeddings.pos.weight[:TRAINED] *= 20
    (folder / "run").mkdir(parents=True)
    path = folder / "run" / "best.ckpt"
    torch.save({"hyper_parameters": dict(module.hparams), "state_dict": module.state_dict()}, path)
    return path


def config(tmp_path: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(
            config_name="positions_probe",
            overrides=["logger=none", "probe.run=run", f"probe.models_dir={tmp_path / 'ckpt'}",
                       f"probe.length={LENGTH}", f"train.seq_len={TRAINED}", f"probe.out_dir={tmp_path / 'out'}",
                       *overrides],
        )  # fmt: skip


@pytest.fixture
def windows(monkeypatch):
    torch.manual_seed(1)
    ids = [torch.randint(0, 61, (4, LENGTH)), torch.randint(0, 61, (3, LENGTH))]
    monkeypatch.setattr(probe, "tokenizer_paths", lambda tokenizer: (Path("tok.json"), Path("encoded")))
    monkeypatch.setattr(probe, "load_tokenizer", lambda path: None)
    monkeypatch.setattr(probe, "special_token_ids", lambda tokenizer: type("Ids", (), {"eos": 0}))
    monkeypatch.setattr(probe, "text_windows", lambda *args: ids)
    return ids


def test_each_variant_is_the_models_loss_with_that_table(tmp_path, windows):
    path = checkpoint(tmp_path / "ckpt", "learned")
    entry_stage("positions_probe")(config(tmp_path))
    report = json.loads((tmp_path / "out" / "probe.json").read_text())
    model = PretrainModule.from_hparams(torch.load(path, weights_only=True)["hyper_parameters"])
    model.load_state_dict(torch.load(path, weights_only=True)["state_dict"])
    model = model.eval().model
    table = model.embeddings.pos.weight.detach().clone()
    rows = {r["variant"]: r for r in report["variants"]}
    for name, edited in variants(table, TRAINED).items():
        with torch.no_grad():
            model.embeddings.pos.weight.copy_(edited)
            tokens = token_losses(model, windows)
        assert rows[name]["loss_within"] == pytest.approx(tokens[:, : TRAINED - 1].mean().item(), rel=1e-5)
        assert rows[name]["loss_past"] == pytest.approx(tokens[:, TRAINED - 1 :].mean().item(), rel=1e-5)
    past = rows["zero past"]["past_minus_trained"]
    assert past["mean"] == pytest.approx(
        rows["zero past"]["loss_past"] - rows["trained"]["loss_past"], rel=1e-4
    )
    assert rows["zero past"]["within_minus_trained"]["mean"] == pytest.approx(0.0, abs=1e-6)  # rows < 8 kept
    assert report["windows"] == 7
    norms = table.norm(dim=1)
    assert report["row_norm_trained"] == pytest.approx(norms[:TRAINED].mean().item())
    assert report["row_norm_untrained"] == pytest.approx(norms[TRAINED:].mean().item())
    assert report["row_norm_at_init"] == pytest.approx(0.02 * 32**0.5)
    assert "| zero all |" in (tmp_path / "out" / "summary.md").read_text()


def test_a_run_without_learned_positions_or_a_length_past_the_table_is_one_line(tmp_path, windows, capsys):
    checkpoint(tmp_path / "ckpt", "rope")
    err = fails_in_one_line(capsys, entry_stage("positions_probe"), config(tmp_path))
    assert "has rope positions; expected learned ones" in err
    checkpoint(tmp_path / "ckpt2", "learned")
    err = fails_in_one_line(
        capsys,
        entry_stage("positions_probe"),
        config(tmp_path, f"probe.models_dir={tmp_path / 'ckpt2'}", "probe.length=32"),
    )
    assert "probe.length: got 32, expected more than train.seq_len=8 and at most the table's 16 rows" in err
    assert not (tmp_path / "out").exists()
