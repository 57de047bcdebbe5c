"""The interpret stage's measures against tiny reference computations, and the stage end to end on a
decoder pretrained for a few steps in the test workspace."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir

from helpers import CONF, entry_stage, stage_config, tiny
from lmforge.errors import ConfigError
from lmforge.interpret.attention import head_statistics
from lmforge.interpret.config import InterpretConfig
from lmforge.interpret.induction import (
    icl_by_window,
    icl_score,
    induction_scores,
    repeat_losses,
    repeated_sequences,
    token_losses,
)
from lmforge.interpret.lens import logit_lens, masked_logit_lens
from lmforge.model import build_model
from lmforge.model.output import ModelOutput


class Stub(torch.nn.Module):
    """A 'model' whose attentions (layers, H, T, T) and logits are fixed functions of its input."""

    def __init__(self, attentions=None, logits=None):
        super().__init__()
        self.attentions, self.logits = attentions, logits

    def forward(self, ids, output_attentions=False, **_):
        B, T = ids.shape
        logits = self.logits(ids) if self.logits else torch.zeros(B, T, 50)
        maps = [a(T).expand(B, -1, -1, -1) for a in self.attentions] if output_attentions else None
        return ModelOutput(logits=logits, last_hidden_state=torch.zeros(B, T, 1), attentions=maps)


def pattern(T: int, key_of) -> torch.Tensor:
    """(1, T, T) attention: each query q puts all its weight on key_of(q), clamped to [0, q]."""
    a = torch.zeros(1, T, T)
    for q in range(T):
        a[0, q, max(0, min(q, key_of(q)))] = 1.0
    return a


def test_logit_lens_reads_each_layer_and_its_last_reading_is_the_models_loss():
    torch.manual_seed(0)
    model = build_model(tiny()).eval()
    ids = torch.randint(0, 61, (3, 16))
    lens = logit_lens(model, [ids[:2], ids[2:]])
    assert [row["layer"] for row in lens] == [0, 1, 2]  # embeddings, then each of the 2 layers
    logits = model(ids).logits[:, :-1]
    expected = F.cross_entropy(logits.reshape(-1, 61), ids[:, 1:].reshape(-1)).item()
    assert lens[-1]["loss"] == pytest.approx(expected, rel=1e-5)
    accuracy = (logits.argmax(-1) == ids[:, 1:]).float().mean().item()
    assert lens[-1]["accuracy"] == pytest.approx(accuracy)


def test_masked_logit_lens_reads_masked_positions_and_its_last_reading_is_the_models_mlm_loss():
    torch.manual_seed(0)
    model = build_model(tiny(family="encoder", norm_placement="post", final_norm=False)).eval()
    ids = torch.randint(5, 61, (3, 16))
    labels = torch.full_like(ids, -100)
    labels[:, [2, 7, 11]] = ids[:, [2, 7, 11]]
    corrupted = ids.clone()
    corrupted[:, [2, 7, 11]] = 4  # [MASK]
    batches = [
        {"input_ids": corrupted[:2], "labels": labels[:2]},
        {"input_ids": corrupted[2:], "labels": labels[2:]},
    ]
    lens = masked_logit_lens(model, batches)
    assert [row["layer"] for row in lens] == [0, 1, 2]
    predict = labels != -100
    logits = model(corrupted, predict_mask=predict).logits  # (9, V): the model's own sparse prediction
    assert lens[-1]["loss"] == pytest.approx(F.cross_entropy(logits, ids[predict]).item(), rel=1e-5)
    assert lens[-1]["accuracy"] == pytest.approx((logits.argmax(-1) == ids[predict]).float().mean().item())
    with pytest.raises(ValueError, match="no masked position"):
        masked_logit_lens(model, [{"input_ids": ids, "labels": torch.full_like(ids, -100)}])


def test_repeated_sequences_repeat_their_first_half_after_the_start_token():
    seqs = repeated_sequences(5, 7, 3, 20, bos=1, seed=0)
    assert seqs.shape == (5, 15) and (seqs[:, 0] == 1).all()
    assert torch.equal(seqs[:, 1:8], seqs[:, 8:]) and seqs[:, 1:].min() >= 3 and seqs[:, 1:].max() < 20
    assert torch.equal(seqs, repeated_sequences(5, 7, 3, 20, bos=1, seed=0))
    with pytest.raises(ValueError, match="token range"):
        repeated_sequences(1, 2, 5, 5, bos=1, seed=0)


def test_a_perfect_induction_head_scores_one_and_a_previous_token_head_zero():
    L = 6
    seqs = repeated_sequences(2, L, 3, 40, bos=1, seed=1)
    T = seqs.shape[1]

    def layer(t):
        induction = pattern(t, lambda q: q - L + 1 if q > L else q)
        previous = pattern(t, lambda q: q - 1)
        return torch.stack([induction[0], previous[0]])[None][0]  # (2 heads, T, T)

    scores = induction_scores(Stub([layer]), seqs)
    assert scores.shape == (1, 2)
    assert scores[0, 0].item() == pytest.approx(1.0) and scores[0, 1].item() == pytest.approx(0.0)
    stats = head_statistics(Stub([layer]), [seqs])
    assert stats["previous_token"][0, 1].item() == pytest.approx(1.0)  # every row 1..T-1 looks back one
    assert stats["entropy"].abs().max().item() < 1e-6  # one-hot rows
    assert T == 2 * L + 1


def test_head_statistics_of_uniform_causal_attention():
    T = 9

    def uniform(t):
        mask = torch.tril(torch.ones(t, t))
        return (mask / mask.sum(-1, keepdim=True))[None]

    stats = head_statistics(Stub([uniform]), [torch.zeros(2, T, dtype=torch.long)])
    rows = torch.arange(1, T)  # query positions 1..T-1 see t + 1 keys
    assert stats["first_token"].item() == pytest.approx((1.0 / (rows + 1)).mean().item())
    assert stats["entropy"].item() == pytest.approx(stats["uniform_entropy"].item(), rel=1e-5)
    assert stats["uniform_entropy"].item() == pytest.approx(torch.log(rows + 1.0).mean().item())


def test_head_statistics_of_uniform_bidirectional_attention():
    T = 6
    uniform = lambda T: torch.full((1, 1, T, T), 1.0 / T)  # noqa: E731
    stats = head_statistics(Stub([uniform]), [torch.zeros(2, T, dtype=torch.long)], causal=False)
    assert stats["uniform_entropy"].item() == pytest.approx(math.log(T))
    assert stats["entropy"][0, 0].item() == pytest.approx(math.log(T), rel=1e-5)
    assert stats["previous_token"][0, 0].item() == pytest.approx(1 / T)
    assert stats["first_token"][0, 0].item() == pytest.approx(1 / T)


def test_repeat_losses_separate_the_two_copies():
    L, V = 5, 30
    seqs = repeated_sequences(3, L, 2, V, bos=1, seed=2)

    def logits(ids):  # certain of the next token on the second copy, uniform before it
        out = torch.zeros(*ids.shape, V)
        out[:, L + 1 : 2 * L, :] = -1e4
        out[:, L + 1 : 2 * L].scatter_(-1, ids[:, L + 2 :, None], 0.0)
        return out

    losses = repeat_losses(Stub([], logits), seqs)
    assert losses["first_copy_loss"] == pytest.approx(math.log(V), rel=1e-5)
    assert losses["second_copy_loss"] == pytest.approx(0.0, abs=1e-4)
    assert losses["repeat_gain"] == pytest.approx(math.log(V), rel=1e-4)


def test_token_losses_by_position_and_the_icl_score():
    V, T = 10, 12

    def logits(ids):  # the right token gets more weight the later the position
        out = torch.zeros(*ids.shape, V)
        nxt = torch.roll(ids, -1, dims=1)
        out.scatter_(
            -1, nxt[..., None], torch.arange(T, dtype=torch.float)[None, :, None].expand(ids.shape[0], T, 1)
        )
        return out

    ids = torch.randint(0, V, (4, T))
    losses = token_losses(Stub([], logits), [ids[:2], ids[2:]])
    assert losses.shape == (4, T - 1)
    curve = losses.mean(0)
    expected = torch.tensor([math.log(V - 1 + math.exp(p)) - p for p in range(T - 1)])
    assert torch.allclose(curve, expected, atol=1e-5)
    assert icl_score(torch.arange(10.0), 2, 6, band=1) == pytest.approx(4.0)
    assert icl_score(curve, 2, 8, band=1) < 0  # later positions are predicted better
    per_window = icl_by_window(losses, 2, 8, band=1)
    assert per_window.shape == (4,) and per_window.mean().item() == pytest.approx(
        icl_score(curve, 2, 8, band=1)
    )
    with pytest.raises(ValueError, match="within the window"):
        icl_score(torch.arange(10.0), 2, 9, band=1)


@pytest.mark.parametrize(
    "values, needle",
    [
        ({"band": 20}, "interpret.early_position"),
        ({"trajectory": []}, "interpret.trajectory"),
        ({"induction_threshold": 1.5}, "interpret.induction_threshold"),
        ({"max_windows": 0}, "interpret.max_windows"),
        ({"name": "a/b"}, "interpret.name"),
    ],
)
def test_bad_interpret_values_name_the_key(values, needle):
    with pytest.raises(ConfigError, match=needle):
        InterpretConfig(**values)


def interpret_config(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="interpret", overrides=["experiment=smoke", "logger=none", *overrides])


def test_interpret_stage_end_to_end(in_workspace):
    pretrain = stage_config(
        "model=llama_tiny",
        "objective=clm",
        "tokenizer=bpe",
        "tokenizer.vocab_size=600",
        "trainer.max_steps=10",
        "trainer.val_check_interval=5",
        "optim.warmup_steps=2",
        "run_name=interp",
    )
    entry_stage("pretrain")(pretrain)
    overrides = [
        "tokenizer.vocab_size=600",
        f"train.seq_len={pretrain.train.seq_len}",
        "interpret.run_dir=artifacts/pretrain/interp",
        "interpret.trajectory=[step1,step3,step10]",
        "interpret.induction_length=8",
        "interpret.induction_sequences=4",
        "interpret.early_position=2",
        "interpret.late_position=6",
        "interpret.band=1",
    ]
    cfg = interpret_config(*overrides, "interpret.out_dir=reports/interpret/interp")
    result = entry_stage("interpret")(cfg)
    out = Path("reports/interpret/interp")
    assert json.loads(Path("reports/interpret/interp.json").read_text()) == pytest.approx(result.metrics)
    for name in [
        "interpret.json",
        "summary.md",
        "attention_1.png",
        "attention_2.png",
        "logit_lens.png",
        "induction.png",
    ]:
        assert (out / name).is_file(), name
    report = json.loads((out / "interpret.json").read_text())
    assert [t["step"] for t in report["trajectory"]] == [1, 3, 10]
    assert result.metrics["lens_final_loss"] == pytest.approx(report["logit_lens"][-1]["loss"])
    assert 0.0 <= result.metrics["max_induction_score"] <= 1.0
    shifted = torch.tensor(report["shifted_scores"])  # each head's best shift, at two copy lengths
    assert shifted.shape == torch.tensor(report["induction_scores"]).shape
    assert result.metrics["max_shifted_score"] == pytest.approx(shifted.max().item())
    assert all(0 <= s for layer in report["shifts"] for s in layer)

    # a final checkpoint with a kept one's weights is measured once, under the kept one's numbers
    twin = interpret_config(*overrides, "interpret.final=step3", "interpret.out_dir=reports/interpret/twin")
    entry_stage("interpret")(twin)
    report = json.loads(Path("reports/interpret/twin/interpret.json").read_text())
    assert report["final_is"] == "step3"
    step3 = report["trajectory"][1]
    assert report["induction_scores"] == step3["induction_scores"]
    assert report["logit_lens"] == step3["logit_lens"] and report["repeat_gain"] == step3["repeat_gain"]
    assert "(the weights of step3)" in Path("reports/interpret/twin/summary.md").read_text()


def test_interpret_stage_on_an_encoder(in_workspace):
    pretrain = stage_config(
        "model=bert_tiny_rope",
        "objective=roberta_mask40",
        "tokenizer=wordpiece",
        "tokenizer.vocab_size=600",
        "trainer.max_steps=10",
        "trainer.val_check_interval=5",
        "optim.warmup_steps=2",
        "run_name=interp_encoder",
    )
    entry_stage("pretrain")(pretrain)
    cfg = interpret_config(
        "interpret=encoder",
        "tokenizer=wordpiece",
        "tokenizer.vocab_size=600",
        f"train.seq_len={pretrain.train.seq_len}",
        "interpret.run_dir=artifacts/pretrain/interp_encoder",
        "interpret.trajectory=[step1,step10]",
        "interpret.out_dir=reports/interpret/interp_encoder",
    )
    result = entry_stage("interpret")(cfg)
    out = Path("reports/interpret/interp_encoder")
    report = json.loads((out / "interpret.json").read_text())
    assert report["family"] == "encoder" and "induction_scores" not in report
    assert "masked positions" in report["lens_reads"]
    assert len(report["logit_lens"]) == 1 + pretrain.model.n_layers
    assert set(result.metrics) >= {"lens_final_loss", "lens_final_accuracy", "max_previous_token_attention"}
    assert not any("induction" in key or "icl" in key for key in result.metrics)
    assert {p.name for p in out.iterdir()} == {
        "interpret.json",
        "summary.md",
        "attention_1.png",
        "attention_2.png",
        "logit_lens.png",
    }
    assert "# Interpretability of the default encoder" in (out / "summary.md").read_text()


def test_interpret_refuses_a_checkpoint_name_without_a_step(in_workspace):
    cfg = interpret_config("interpret.trajectory=[best]", "interpret.run_dir=artifacts/pretrain/interp")
    from lmforge.errors import DataError

    with pytest.raises(DataError, match="step300"):
        entry_stage("interpret")(cfg)


@pytest.mark.parametrize("family", ["decoder", "encoder", "attn_only"])
def test_each_interpret_preset_reads_checkpoints_its_pretrain_run_keeps(family):
    """conf/interpret/<family>.yaml's trajectory names step<N> checkpoints of the default pipeline's
    run of that family (its trainer.max_steps times train.keep_at): a recipe with other steps that
    leaves the preset behind fails here, not in `dvc repro`."""
    from benchmarks.time_to_quality import ROOT, pipeline_var, stage_plan
    from lmforge.training.pretrain import kept_steps

    presets = {**pipeline_var(ROOT / "dvc.yaml", "families"), **pipeline_var(ROOT / "dvc.yaml", "probes")}
    plan = stage_plan("pretrain.py", "config", [f"{group}={name}" for group, name in presets[family].items()])
    kept = {f"step{n}" for n in kept_steps(plan.train.keep_at, plan.trainer.max_steps)}
    import yaml

    own, base = (
        yaml.safe_load((ROOT / "conf/interpret" / f"{n}.yaml").read_text()) for n in (family, "base")
    )
    trajectory = set(own.get("trajectory", base.get("trajectory")) or ())
    assert trajectory and trajectory <= kept, (family, sorted(trajectory - kept), sorted(kept))
