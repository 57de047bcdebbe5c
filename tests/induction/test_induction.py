"""The induction study: repeated spans against a hand-checked copy, the share of repeated windows, the
verdict rule, and both stages end to end in the test workspace."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

from helpers import CONF, entry_stage, fails_in_one_line
from lmforge.induction.data import RepeatedSpans, SyntheticRepeats, repeat_span
from lmforge.induction.summary import head_score, verdict
from lmforge.training.checkpoints import load_module


def test_repeat_span_copies_an_earlier_span_over_a_later_one_and_nothing_else():
    ids = torch.arange(100, 164)  # distinct tokens: every changed position is the copy
    for seed in range(50):
        out = repeat_span(ids, np.random.default_rng(seed), 4, 20)
        changed = torch.nonzero(out != ids).flatten()
        b, span = int(changed[0]), len(changed)
        assert changed.tolist() == list(range(b, b + span))  # one contiguous destination
        a = int(out[b]) - 100  # where the copied tokens came from
        assert 4 <= span <= 20 and a + span <= b
        assert torch.equal(out[b : b + span], ids[a : a + span])
    assert torch.equal(ids, torch.arange(100, 164))  # the input is left as it was


def test_repeat_span_refuses_a_window_without_room_for_two_spans():
    with pytest.raises(ValueError, match="no room for two spans of 8"):
        repeat_span(torch.arange(10), np.random.default_rng(0), 8, 8)


class Windows(torch.utils.data.Dataset):
    def __init__(self, n: int, length: int = 64) -> None:
        self.n, self.length = n, length

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict:
        return {"input_ids": torch.arange(self.length) + 1000 * index, "index": index}


def repeated(data: RepeatedSpans, draw: int = 0) -> list[bool]:
    return [
        not torch.equal(data.item(i, draw)["input_ids"], data.base[i]["input_ids"]) for i in range(len(data))
    ]


@pytest.mark.parametrize("share", [0.0, 0.25, 1.0])
def test_repeated_spans_repeat_the_configured_share_of_windows(share):
    data = RepeatedSpans(Windows(400), share, 8, 32, seed=3)
    got = np.mean(repeated(data))
    sd = (share * (1 - share) / 400) ** 0.5
    assert abs(got - share) <= 4 * sd + 1e-12, got


def test_repeated_spans_are_drawn_from_seed_draw_and_window():
    data = RepeatedSpans(Windows(50), 0.5, 8, 32, seed=0)
    assert all(torch.equal(data.item(i, 2)["input_ids"], data.item(i, 2)["input_ids"]) for i in range(50))
    assert repeated(data, 0) != repeated(data, 1)  # a new draw chooses other windows
    other = RepeatedSpans(Windows(50), 0.5, 8, 32, seed=1)
    assert repeated(data) != repeated(other)
    assert torch.equal(data[7]["input_ids"], data.item(7, 0)["input_ids"])  # a plain index is draw 0


@pytest.mark.parametrize(
    "low, high, expected",
    [
        (0.4, 0.6, "forms"),
        (0.01, 0.2, "does not form"),
        (0.2, 0.4, "not identified"),
        (None, None, "not identified (one seed)"),
    ],
)
def test_verdict_places_the_seed_interval_against_the_threshold(low, high, expected):
    assert verdict(low, high, 0.3) == expected


def test_curves_recorded_before_the_shifted_score_are_read_by_the_textbook_score():
    new = {0: [{"max_induction_score": 0.1, "max_shifted_score": 0.5}]}
    old = {0: [{"max_induction_score": 0.1}], 1: [{"max_induction_score": 0.2, "max_shifted_score": 0.5}]}
    assert head_score(new) == "max_shifted_score" and head_score(old) == "max_induction_score"


def induction_config(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(
            config_name="induction",
            overrides=[
                "experiment=smoke",
                "logger=none",
                "tokenizer.vocab_size=600",
                "trainer.max_steps=6",
                *overrides,
            ],
        )


def test_induction_stages_end_to_end(in_workspace):
    for name, share in [("share50", 0.5), ("share0", 0.0)]:
        cfg = induction_config(
            f"induction.name={name}", f"induction.repeat_share={share}", "induction.seeds=[0,1]"
        )
        result = entry_stage("induction")(cfg)
        folder = Path("reports/induction/runs") / name
        written = json.loads((folder / "metrics.json").read_text())
        assert written.pop("data") == "text" and written == pytest.approx(result.metrics)
        assert all(isinstance(v, float | int) for v in result.metrics.values())  # what MLflow logs
        with (folder / "curve.csv").open() as f:
            rows = list(csv.DictReader(f))
        assert [(int(r["seed"]), int(r["step"])) for r in rows] == [(s, t) for s in (0, 1) for t in (0, 3, 6)]
        assert all(0.0 <= float(r["max_induction_score"]) <= 1.0 for r in rows)
        assert all(0.0 <= float(r["max_shifted_score"]) <= 1.0 and int(r["shift"]) >= 0 for r in rows)
        assert [int(r["tokens"]) for r in rows[:3]] == [0, 3 * 8 * 64, 6 * 8 * 64]  # batch 8 x 64 tokens
        train_losses = [float(r["train_loss"]) for r in rows[:3]]  # the trained batch's loss, none at 0
        assert math.isnan(train_losses[0]) and all(2.0 < x < 12.0 for x in train_losses[1:])
        last = rows[2]
        assert float(last["repeat_gain"]) == pytest.approx(
            float(last["first_copy_loss"]) - float(last["second_copy_loss"]), abs=1e-4
        )
        assert result.metrics["max_induction_score_seed1"] == pytest.approx(
            float(rows[-1]["max_induction_score"]), rel=1e-5
        )

    summary = entry_stage("induction_summary")(induction_config())
    report = json.loads(Path("reports/induction/summary.json").read_text())
    assert [row["name"] for row in report["shares"]] == ["share0", "share50"]  # ordered by share
    assert all(row["seeds"] == [0, 1] and row["steps"] == 6 for row in report["shares"])
    assert all(row["verdict"] in {"forms", "does not form", "not identified"} for row in report["shares"])
    assert all(row["score"] == "shifted" and set(row["shift"]) == {"0", "1"} for row in report["shares"])
    assert summary.metrics["max_induction_score_share0"] == pytest.approx(
        report["shares"][0]["max_induction_score"][0]
    )
    assert Path("reports/induction/induction.png").is_file()
    assert "| 50% repeated | 2 | 6 |" in Path("reports/induction/summary.md").read_text()


def test_the_synthetic_task_trains_and_summarises_apart(in_workspace):
    runs = "reports/induction/synthetic/runs"
    cfg = induction_config(
        "induction.name=classic", "induction.data=synthetic", "induction.synthetic_vocab=20",
        "induction.seeds=[0]", f"induction.runs_dir={runs}", "induction.keep_steps=[3]",
    )  # fmt: skip
    entry_stage("induction")(cfg)
    metrics = json.loads((Path(runs) / "classic/metrics.json").read_text())
    assert metrics["data"] == "synthetic" and metrics["repeat_share"] == 1.0
    # the kept weights: the listed step's and the last, each a model the interpretation code loads
    kept = Path(runs) / "classic/seed0"
    assert sorted(p.name for p in kept.iterdir()) == ["last.ckpt", "step3.ckpt"]
    step3, last = (load_module(kept / name).model for name in ("step3.ckpt", "last.ckpt"))
    pairs = zip(step3.state_dict().values(), last.state_dict().values(), strict=True)
    assert not all(torch.equal(a, b) for a, b in pairs)  # three more steps trained between them
    out = "reports/induction/synthetic"
    entry_stage("induction_summary")(
        induction_config(f"induction.runs_dir={runs}", f"induction.out_dir={out}")
    )
    assert "| synthetic task | 1 | 6 |" in Path(out, "summary.md").read_text()

    # two runs of one kind, one on the periodic task: each row says which run it is
    for name, data in [("repeating", "periodic"), ("again", "periodic")]:
        entry_stage("induction")(
            induction_config(
                f"induction.name={name}",
                f"induction.data={data}",
                "induction.synthetic_vocab=20",
                "induction.seeds=[0]",
                f"induction.runs_dir={runs}",
            )  # fmt: skip
        )
    entry_stage("induction_summary")(
        induction_config(f"induction.runs_dir={runs}", f"induction.out_dir={out}")
    )
    table = Path(out, "summary.md").read_text()
    assert "| synthetic task | 1 | 6 |" in table  # the only one of its kind keeps its plain label
    assert "| periodic task (again) | 1 | 6 |" in table and "| periodic task (repeating) | 1 | 6 |" in table
    assert Path(out, "induction.png").is_file()


def test_synthetic_windows_copy_a_span_of_random_tokens_and_are_drawn_from_seed_draw_and_window():
    data = SyntheticRepeats(n=10, length=33, low=5, high=5000, bos=1, seed=0, min_span=4, max_span=8)
    spans = set()
    for index in range(10):
        ids = data[index]["input_ids"]
        assert ids.shape == (33,) and ids[0] == 1 and ids.dtype == torch.long
        assert ((ids[1:] >= 5) & (ids[1:] < 5000)).all()
        body = ids[1:].tolist()
        copies = [  # (a, b, L): body[b:b+L] == body[a:a+L], the longest copy of 4 or more tokens
            (a, b, n)
            for n in range(8, 3, -1)
            for a in range(len(body) - n)
            for b in range(a + n, len(body) - n + 1)
            if body[a : a + n] == body[b : b + n]
        ]
        assert copies, body  # random draws from 4,995 tokens repeat 4 in a row only by the copy
        spans.add(copies[0][1] - copies[0][0])
    assert len(spans) > 3  # the distance varies: no fixed offset predicts the copy
    ids = data[3]["input_ids"]
    assert torch.equal(data.item(3, 0)["input_ids"], ids) and not torch.equal(
        data.item(3, 1)["input_ids"], ids
    )
    with pytest.raises(ValueError, match="token range"):
        SyntheticRepeats(n=1, length=8, low=5, high=6, bos=1, seed=0, min_span=2, max_span=3)


def test_periodic_windows_repeat_a_random_sequence_whose_period_varies():
    data = SyntheticRepeats(
        n=20, length=65, low=5, high=69, bos=1, seed=0, min_span=8, max_span=32, layout="periodic"
    )
    periods = set()
    for index in range(20):
        ids = data[index]["input_ids"]
        assert ids.shape == (65,) and ids[0] == 1 and ids.dtype == torch.long
        body = ids[1:]
        assert ((body >= 5) & (body < 69)).all()
        period = next(p for p in range(8, 33) if torch.equal(body[p:], body[:-p]))  # the smallest
        assert 2 * period <= 64  # repeated at least once
        periods.add(period)
    assert len(periods) > 5  # no fixed offset finds the earlier copy
    assert torch.equal(data.item(4, 0)["input_ids"], data[4]["input_ids"])
    assert not torch.equal(data.item(4, 1)["input_ids"], data[4]["input_ids"])


def test_copies_windows_copy_spans_from_distances_that_vary():
    data = SyntheticRepeats(
        n=50, length=128, low=5, high=69, bos=1, seed=0, min_span=8, max_span=16, layout="copies"
    )
    distances: set[int] = set()
    repeated = total = 0
    for index in range(50):
        ids = data[index]["input_ids"]
        assert ids.shape == (128,) and ids[0] == 1 and ids.dtype == torch.long
        body = ids[1:].tolist()
        assert all(5 <= t < 69 for t in body)
        # a 5-gram of 64 random tokens seen before is (all but surely) inside a copy
        for t in range(4, len(body)):
            earlier = [u for u in range(4, t) if body[u - 4 : u + 1] == body[t - 4 : t + 1]]
            repeated += bool(earlier)
            distances.update(t - u for u in earlier)
        total += len(body)
    # about 40% of tokens lie in copies (less each copy's first 4 here); the periodic layout gives ~70%
    assert 0.15 < repeated / total < 0.45
    assert len(distances) > 40  # no fixed offset finds the copies
    assert torch.equal(data.item(4, 0)["input_ids"], data[4]["input_ids"])
    assert not torch.equal(data.item(4, 1)["input_ids"], data[4]["input_ids"])
    with pytest.raises(ValueError, match="layout 'spiral'"):
        SyntheticRepeats(
            n=1, length=8, low=5, high=69, bos=1, seed=0, min_span=2, max_span=3, layout="spiral"
        )


def test_induction_refuses_a_share_outside_zero_to_one(in_workspace, capsys):
    err = fails_in_one_line(capsys, entry_stage("induction"), induction_config("induction.repeat_share=1.5"))
    assert "induction.repeat_share: got 1.5, expected a share in [0, 1]" in err


def test_induction_refuses_kept_steps_past_the_run(in_workspace, capsys):
    err = fails_in_one_line(capsys, entry_stage("induction"), induction_config("induction.keep_steps=[7]"))
    assert "induction.keep_steps: got [7], expected steps within trainer.max_steps=6" in err
    err = fails_in_one_line(capsys, entry_stage("induction"), induction_config("induction.keep_steps=[0]"))
    assert "induction.keep_steps: got [0], expected optimizer steps >= 1" in err
