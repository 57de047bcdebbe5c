"""The translation stages end to end on a local TSV (the alternative to the Debian packages), through
the real composed config `conf/translate.yaml` with the smoke overlay; and their bad inputs from the
command line: one line, exit 2, earlier outputs intact."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from helpers import entry_stage
from lmforge.translate import evaluate
from lmforge.translate.evaluate import corpus_difference, score

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "pairs.tsv"
LOCAL = [
    "experiment=smoke",
    "logger=none",
    "pairs=local",
    "pairs.local.path=pairs.tsv",
    "pairs.val_groups=[g0]",
    "pairs.test_groups=[g1,g2]",
    "translate.vocab_size=300",
]


def _config(*overrides: str):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="translate", overrides=[*LOCAL, *overrides])


@pytest.fixture
def local_pairs(tmp_path, monkeypatch) -> Path:
    shutil.copy(FIXTURE, tmp_path / "pairs.tsv")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_stages_translate_a_local_tsv_end_to_end(local_pairs, monkeypatch):
    cfg = _config("trainer.max_steps=40", "trainer.val_check_interval=20", "translate.average_last=2")
    entry_stage("translate_data")(cfg)
    card = (local_pairs / "reports/translate/data_card.md").read_text()
    assert "g1 (20), g2 (20)" in card and "never seen in training" in card
    entry_stage("translate_tokenizer")(cfg)
    assert (local_pairs / "artifacts/translate/tokenizer/tokenizer.json").is_file()
    result = entry_stage("translate_train")(cfg)
    assert result.metrics["steps"] == 40 and result.metrics["averaged_checkpoints"] == 2
    curve = (local_pairs / "reports/translate/main/val_loss.csv").read_text().splitlines()[1:]
    assert len(curve) == 2 and float(curve[1].split(",")[1]) < float(curve[0].split(",")[1])  # it learns
    scored = []
    monkeypatch.setattr(evaluate, "score", lambda hyps, refs: scored.append(hyps) or score(hyps, refs))
    out = entry_stage("translate_eval")(cfg)
    assert len(scored) == 3 + 2  # beams 1, 2 and the configured 4 once each, then the two baselines
    report = json.loads((local_pairs / "reports/translate/main/eval.json").read_text())
    assert report["test_sentences"] == 40 and set(out.metrics) >= {"bleu", "chrf", "bleu_beam1", "bleu_beam2"}
    assert report["baseline_dictionary_bleu"] > report["baseline_copy_bleu"]
    assert report["bleu"] == report["bleu_beam4"]  # the headline is the configured beam's one score
    for beam in (2, 4):  # each beam against greedy, with its paired bootstrap interval
        diff = report[f"bleu_beam{beam}_vs_greedy"]
        assert diff == pytest.approx(report[f"bleu_beam{beam}"] - report["bleu_beam1"])
        assert report[f"bleu_beam{beam}_vs_greedy_low"] <= report[f"bleu_beam{beam}_vs_greedy_high"]
    assert "BLEU minus greedy's" in (local_pairs / "reports/translate/main/bleu.md").read_text()
    assert (local_pairs / "reports/translate/main/bleu_by_beam.png").stat().st_size > 1000
    samples = (local_pairs / "reports/translate/main/samples.md").read_text()
    assert samples.count("- hypothesis:") == 5 and "reference (tgt)" in samples


REFS = [
    f"the {w} went to the city and saw the old tower of stone" for w in ("man", "king", "girl", "dog", "boy")
] * 8


def test_corpus_difference_is_the_corpus_difference_with_a_paired_bootstrap_interval():
    from sacrebleu.metrics import BLEU

    better = REFS[:30] + [r.replace("old", "new") for r in REFS[30:]]  # 30 exact, 10 one word off
    worse = [r.replace("tower", "wall") for r in REFS]
    diff, low, high = corpus_difference(better, worse, REFS, samples=200)
    corpus = BLEU().corpus_score(better, [REFS]).score - BLEU().corpus_score(worse, [REFS]).score
    assert diff == pytest.approx(corpus) and 0 < low <= diff <= high  # better on every sentence: above 0
    same, low, high = corpus_difference(worse, worse, REFS, samples=50)
    assert same == low == high == 0.0  # a system against itself: no difference on any resample
    mixed = REFS[:20] + worse[20:]  # better on half the sentences, worse on none: interval above zero
    assert corpus_difference(mixed, worse, REFS, samples=200)[1] > 0
    # one sentence each way: the interval covers zero
    tie_a, tie_b = [REFS[0], worse[1]], [worse[0], REFS[1]]
    _, low, high = corpus_difference(tie_a * 10, tie_b * 10, REFS[:2] * 10, samples=300)
    assert low < 0 < high


def test_chrf_difference_is_the_corpus_chrf_difference():
    from sacrebleu.metrics import CHRF

    worse = [r.replace("tower", "wall") for r in REFS]
    diff, low, high = corpus_difference(REFS, worse, REFS, metric="chrf", samples=100)
    corpus = CHRF().corpus_score(REFS, [REFS]).score - CHRF().corpus_score(worse, [REFS]).score
    assert diff == pytest.approx(corpus) and 0 < low <= diff <= high
    with pytest.raises(ValueError, match="got metric 'ter', expected one of"):
        corpus_difference(REFS, worse, REFS, metric="ter")


def test_the_kept_checkpoints_are_the_models_shorter_runs_write_and_are_scored_against_the_dictionary(
    local_pairs, monkeypatch
):
    import torch

    short = _config("trainer.max_steps=20", "trainer.val_check_interval=10", "run_name=short")
    entry_stage("translate_data")(short)
    entry_stage("translate_tokenizer")(short)
    entry_stage("translate_train")(short)
    cfg = _config(
        "translate_run=length",
        "trainer.max_steps=40",
        "trainer.val_check_interval=10",
        "translate.keep_every=20",
        "translate.beam_sizes=[1,2]",
        "translate.decode.beam_size=2",
    )
    assert entry_stage("translate_train")(cfg).metrics["kept_checkpoints"] == 1
    kept = torch.load(local_pairs / "artifacts/translate/length/model_step20.ckpt", weights_only=True)
    alone = torch.load(local_pairs / "artifacts/translate/short/model.ckpt", weights_only=True)
    assert kept["averaged_steps"] == alone["averaged_steps"] == [10, 20]  # smoke: average_last=2, every 10
    for key, value in alone["state_dict"].items():  # bit for bit: the schedule ignores the run's length
        assert torch.equal(kept["state_dict"][key], value), key
    from lmforge.translate import length

    built = []
    monkeypatch.setattr(length, "Dictionary", lambda train: built.append(1) or evaluate.Dictionary(train))
    out = entry_stage("translate_length")(cfg)
    assert len(built) == 1  # the dictionary is learnt once, not once per test sentence
    report = json.loads((local_pairs / "reports/translate/length/length.json").read_text())
    assert [r["step"] for r in report["rows"]] == [20, 40] and out.metrics["final_step"] == 40
    short_eval = entry_stage("translate_eval")(short).metrics  # the default stage on the 20-step model
    first = report["rows"][0]
    assert first["bleu_beam1"] == short_eval["bleu_beam1"] and first["bleu_beam2"] == short_eval["bleu_beam2"]
    assert report["dictionary_chrf"] == short_eval["baseline_dictionary_chrf"]
    for row in report["rows"]:
        for metric in ("bleu", "chrf"):
            assert row[f"{metric}_vs_dictionary"] == pytest.approx(
                row[f"{metric}_beam2"] - report[f"dictionary_{metric}"]
            )
            low, high = row[f"{metric}_vs_dictionary_low"], row[f"{metric}_vs_dictionary_high"]
            expected = "above" if low > 0 else "below" if high < 0 else "not distinguishable"
            assert low <= high and row[f"{metric}_verdict"] == expected
    assert "| 40 |" in (local_pairs / "reports/translate/length/length.md").read_text()

    class OtherVocabulary:  # the real tokenizer, one entry larger than the models were trained on
        def __init__(self, tokenizer):
            self.tokenizer = tokenizer

        def __getattr__(self, name):
            return getattr(self.tokenizer, name)

        def get_vocab_size(self):
            return self.tokenizer.get_vocab_size() + 1

    real = length.load_tokenizer
    monkeypatch.setattr(length, "load_tokenizer", lambda path: OtherVocabulary(real(path)))
    with pytest.raises(
        Exception, match=r"model_step20.ckpt: vocabulary of \d+, expected the tokenizer's \d+"
    ):
        entry_stage("translate_length")(cfg)
    monkeypatch.setattr(length, "load_tokenizer", real)
    (local_pairs / "artifacts/translate/length/model_step20.ckpt").unlink()
    with pytest.raises(Exception, match=r"model_step20.ckpt: not found; expected the checkpoints"):
        entry_stage("translate_length")(cfg)


def test_keep_every_must_be_a_multiple_of_the_snapshot_interval(local_pairs):
    done = _cli("translate_train.py", "translate.keep_every=15", cwd=local_pairs)
    assert done.returncode == 2 and done.stderr.strip() == (
        "error: translate.keep_every: got 15, expected null or a positive multiple of "
        "translate.checkpoint_every=10"
    ), done.stderr[-500:]


def _cli(script: str, *overrides: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, str(ROOT / "pipelines" / script), *LOCAL, *overrides],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["translate.decode.beam_size=0"], "translate.decode.beam_size: got 0, expected an integer >= 1"),
        (
            ["translate.decode.length_penalty=-0.5"],
            "translate.decode.length_penalty: got -0.5, expected a number >= 0",
        ),
    ],
)
def test_bad_decoding_settings_are_one_line_and_exit_2(local_pairs, overrides, message):
    done = _cli("translate_eval.py", *overrides, cwd=local_pairs)
    assert done.returncode == 2 and done.stderr.strip() == f"error: {message}", done.stderr[-500:]


def test_a_misaligned_pair_is_refused_and_the_earlier_outputs_stay(local_pairs):
    assert _cli("translate_data.py", cwd=local_pairs).returncode == 0
    before = {p: p.read_bytes() for p in (local_pairs / "data/translate").iterdir()}
    with open(local_pairs / "pairs.tsv", "a", encoding="utf-8") as f:
        f.write("A verse without its translation.\n")
    done = _cli("translate_data.py", cwd=local_pairs)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: pairs.tsv:241: got 1 tab-separated columns, expected 2 (source, target) or 3 "
        "(source, target, group): a misaligned pair"
    )
    assert {p: p.read_bytes() for p in (local_pairs / "data/translate").iterdir()} == before


def test_a_source_longer_than_max_seq_len_is_refused_when_asked(local_pairs):
    cfg = _config("model.max_seq_len=8", "translate.long_pairs=refuse")
    entry_stage("translate_data")(cfg)
    entry_stage("translate_tokenizer")(cfg)
    with pytest.raises(
        Exception,
        match=r"train pair line\d+: \d+ source and \d+ target tokens with EOS, expected at most model.max_seq_len=8",
    ):
        entry_stage("translate_train")(cfg)
