"""The finetune stage end to end on a toy task and a toy "pretrain" checkpoint: it writes its
reports and a weights_only-loadable export whose score is the reported one; LoRA and freezing change
what trains; bad inputs are one line and leave earlier outputs intact."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from helpers import entry_point, entry_stage, mlflow_runs, stage_config, tiny, tiny_wordpiece
from lmforge.errors import ConfigError, DataError
from lmforge.finetune import stage
from lmforge.finetune.examples import Collator, encode
from lmforge.finetune.module import FinetuneModule, evaluate
from lmforge.stats import paired
from lmforge.tasks.config import Kind
from lmforge.training.checkpoints import read_checkpoint
from lmforge.training.config import ObjectiveConfig, ObjectiveKind, OptimConfig
from lmforge.training.module import PretrainModule

WORDS = ["the old tower", "paris is old", "the tower runs", "where does paris stand", "old paris runs"]
SHORT = [
    "finetune.max_steps=24",
    "finetune.val_every=8",
    "finetune.batch_size=4",
    "finetune.warmup_ratio=0.1",
    "finetune.optim.lr=3e-3",
    "finetune.head_dropout=0.0",
    "finetune.latency_examples=2",
]


def records(n: int, offset: int = 0) -> list[dict]:
    rows = []
    for i in range(n):
        text = WORDS[(i + offset) % len(WORDS)]
        rows.append(
            {"id": f"r{offset}-{i}", "text": text, "label": "positive" if "tower" in text else "negative"}
        )
    return rows


def write_split(folder: Path, split: str, rows: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    task = tmp_path / "data/tasks/example_local"
    for split, (n, offset) in {"train": (40, 0), "val": (10, 1), "test": (10, 2)}.items():
        write_split(task, split, records(n, offset))
    tokenizer = tmp_path / "artifacts/tokenizers/wordpiece"
    tokenizer.mkdir(parents=True)
    tiny_wordpiece().save(str(tokenizer / "tokenizer.json"))
    model = tiny(family="encoder", vocab_size=20, n_segments=2, max_seq_len=32)
    pretrained = PretrainModule(model, ObjectiveConfig(kind=ObjectiveKind.mlm), OptimConfig(), max_steps=1)
    checkpoint = tmp_path / "artifacts/pretrain/encoder/best.ckpt"
    checkpoint.parent.mkdir(parents=True)
    torch.save(
        {"state_dict": pretrained.state_dict(), "hyper_parameters": dict(pretrained.hparams)}, checkpoint
    )
    return tmp_path


def finetune(*overrides: str):
    cfg = stage_config("task=example_local", "run_name=toy", *SHORT, *overrides)
    return entry_stage("finetune")(cfg)


def test_pretrained_row_reports_and_exports_the_model_it_scores(workspace):
    result = finetune()
    reports = workspace / "reports/finetune/rows/toy"
    metrics = json.loads((reports / "metrics.json").read_text())
    run = json.loads((reports / "run.json").read_text())
    clock = json.loads((workspace / "reports/timings/finetune/rows/toy.json").read_text())
    assert {**metrics, **{k: clock[k] for k in ("train_seconds", "latency_ms")}} == pytest.approx(
        result.metrics
    )
    assert metrics["test_accuracy"] == 1.0 > metrics["baseline_majority_accuracy"]
    assert {"baseline_tfidf_logreg_accuracy", "params_trainable"} <= set(metrics)
    assert not {"train_seconds", "latency_ms"} & set(metrics)  # the clock is in the timings file, for MLflow
    assert clock["latency_ms"] > 0 and set(clock["train_seconds_per_seed"]) == {"0"}
    assert metrics["params_trainable"] == metrics["params_total"]
    assert run["init"] == "pretrained (encoder)" and run["adapt"] == "full" and run["examples"]["test"] == 10
    assert (workspace / "reports/finetune/curves/toy.csv").read_text().startswith("seed,step,")

    checkpoint = read_checkpoint(workspace / "artifacts/finetune/toy/seed0/best.ckpt")  # weights_only
    module = FinetuneModule.from_hparams(checkpoint["hyper_parameters"])
    module.load_state_dict(checkpoint["state_dict"])
    features = encode("classification", records(10, 2), tiny_wordpiece(), ["negative", "positive"], 32, False)
    assert evaluate(module, [Collator(0)(features.features)])["accuracy"] == metrics["test_accuracy"]


def test_train_examples_takes_the_same_seeded_sample_for_the_row_and_its_baselines(workspace, monkeypatch):
    seen = {}
    spec = stage.TASKS[Kind.classification]

    def spy(train, test, labels, seed):
        seen["baseline_train"] = [r["id"] for r in train]
        return spec.baselines(train, test, labels, seed)

    monkeypatch.setitem(stage.TASKS, Kind.classification, replace(spec, baselines=spy))
    finetune("finetune.train_examples=8", "finetune.max_steps=4", "finetune.val_every=4")
    run = json.loads((workspace / "reports/finetune/rows/toy/run.json").read_text())
    assert run["examples"]["train"] == 8
    every = [r["id"] for r in records(40)]
    assert seen["baseline_train"] == [r["id"] for r in stage.sample(records(40), 8, 0)]
    assert len(set(seen["baseline_train"])) == 8 and set(seen["baseline_train"]) < set(every)


def test_the_backbone_starts_from_the_pretrain_checkpoint_or_from_scratch(workspace, monkeypatch):
    starts = {}
    real_start = stage.start

    def spy(ft):
        starts[ft.init] = begin = real_start(ft)
        return begin

    monkeypatch.setattr(stage, "start", spy)
    finetune("finetune.max_steps=8")
    finetune("finetune.init=scratch", "finetune.max_steps=8")
    saved = read_checkpoint(workspace / "artifacts/pretrain/encoder/best.ckpt")["state_dict"]
    ours = starts["pretrained"].model.state_dict()
    assert torch.equal(ours["embeddings.tok.weight"], saved["model.embeddings.tok.weight"])
    assert starts["scratch"].model is None and starts["scratch"].config == starts["pretrained"].config


def test_lora_trains_adapters_and_exports_merged_weights(workspace):
    full = finetune("finetune.max_steps=8")
    lora = finetune("adapt=lora", "adapt.lora_rank=2")
    assert lora.metrics["params_trainable"] < full.metrics["params_trainable"] / 2
    state = read_checkpoint(workspace / "artifacts/finetune/toy/seed0/best.ckpt")["state_dict"]
    assert not [k for k in state if "lora" in k]  # merged: the plain architecture's parameter names
    assert lora.metrics["params_total"] == full.metrics["params_total"]


def test_frozen_backbone_trains_only_the_head(workspace):
    result = finetune("adapt=frozen", "finetune.max_steps=8")
    d = 32
    assert result.metrics["params_trainable"] == d * d + d + 2 * d + 2  # pooler + classifier


def test_several_seeds_give_mean_and_std(workspace):
    result = finetune("finetune.seeds=[0,1]", "finetune.max_steps=8", "finetune.optim.lr=1e-4")
    run = json.loads((workspace / "reports/finetune/rows/toy/run.json").read_text())
    values = run["test_per_seed"]["accuracy"]
    assert len(values) == 2 and result.metrics["test_accuracy"] == pytest.approx(sum(values) / 2)
    assert (workspace / "artifacts/finetune/toy/seed1/best.ckpt").is_file()


@pytest.mark.parametrize(
    "setup, overrides, error, needle",
    [
        (None, ["adapt=lora", "adapt.lora_targets=[nowhere]"], ConfigError, "match no Linear layer"),
        (None, ["finetune.init=hf:empty"], DataError, "no config.json"),
        (None, ["finetune.init=hf:no/such/folder"], DataError, "no such folder, and not a packaged model"),
        (None, ["finetune.init=elsewhere"], ConfigError, "expected pretrained, scratch or hf:"),
        ("empty_test", [], DataError, "the test split"),
        ("bad_label", [], DataError, "label 'maybe' is not in the task's label set"),
    ],
)
def test_bad_input_is_one_line_and_keeps_earlier_outputs(workspace, setup, overrides, error, needle):
    finetune("finetune.max_steps=8")
    kept = {p: p.read_bytes() for p in (workspace / "reports/finetune/rows/toy").iterdir()}
    (workspace / "empty").mkdir()
    task = workspace / "data/tasks/example_local"
    if setup == "empty_test":
        (task / "test.jsonl").write_text("")
    if setup == "bad_label":
        write_split(task, "train", [*records(4), {"id": "x", "text": "the tower", "label": "maybe"}])
    with pytest.raises(error) as info:
        finetune(*overrides)
    assert needle in str(info.value) and "\n" not in str(info.value)
    assert {p: p.read_bytes() for p in kept} == kept


def test_summary_puts_rows_side_by_side(workspace):
    finetune("finetune.max_steps=8")
    finetune("finetune.max_steps=8", "adapt=frozen", "run_name=toy-frozen")
    entry_stage("finetune_summary")(stage_config("summary.comparisons=[]"))
    table = (workspace / "reports/finetune/summary.md").read_text().splitlines()
    assert table[0].startswith(
        "| row | task | model | init | adaptation | seeds | steps (best) | test metric"
    )
    assert len(table) == 4 and sum("frozen backbone" in line for line in table) == 1
    assert {line.split(" | ")[0] for line in table[2:]} == {"| toy", "| toy-frozen"}  # keyed by row name
    assert all("majority 60.0" in line for line in table[2:])
    numbers = json.loads((workspace / "reports/finetune/summary.json").read_text())
    assert set(numbers["rows"]) == {"toy", "toy-frozen"} and "test_accuracy" in numbers["rows"]["toy"]
    assert numbers["comparisons"] == {}


def test_summary_compares_rows_paired_by_seed(workspace):
    finetune("finetune.max_steps=8", "finetune.seeds=[0,1,2]")
    finetune("finetune.max_steps=8", "finetune.seeds=[0,1,2]", "adapt=frozen", "run_name=toy-frozen")
    comparison = "summary.comparisons=[{a:toy,b:toy-frozen,claim:training the backbone helps}]"
    result = entry_stage("finetune_summary")(stage_config(comparison))
    runs = [
        json.loads((workspace / f"reports/finetune/rows/{r}/run.json").read_text())
        for r in ("toy", "toy-frozen")
    ]
    a, b = (r["test_per_seed"]["accuracy"] for r in runs)
    expected = paired(dict(enumerate(a)), dict(enumerate(b)))
    numbers = json.loads((workspace / "reports/finetune/summary.json").read_text())
    assert set(numbers["comparisons"]) == {"toy-vs-toy-frozen"}
    assert numbers["comparisons"]["toy-vs-toy-frozen"]["difference"] == pytest.approx(expected.mean)
    assert numbers["comparisons"]["toy-vs-toy-frozen"]["seeds"] == 3
    assert result.metrics["toy-vs-toy-frozen/difference"] == pytest.approx(expected.mean)
    text = (workspace / "reports/finetune/summary.md").read_text()
    line = next(line for line in text.splitlines() if line.startswith("| training the backbone helps"))
    verdict = expected.verdict.replace("a higher", "toy higher").replace("b higher", "toy-frozen higher")
    assert f"| {100 * expected.mean:+.1f} |" in line and line.endswith(f"| 3 | {verdict} |")


def test_a_row_run_a_seed_at_a_time_reads_as_the_row_run_at_once(workspace):
    """The reference is the row trained with seeds [0, 1, 2] in one run; the same row run once per
    seed, each run's reports under <row>/seed<k>/, reads in the summary as the same row: the same
    seeds, test scores per seed, means, stds, steps and baselines (times aside)."""
    finetune("finetune.max_steps=8", "finetune.seeds=[0,1,2]")
    for seed in (2, 0, 1):
        finetune(
            "finetune.max_steps=8",
            f"finetune.seeds=[{seed}]",
            "run_name=toy-split",
            f"finetune.reports_dir=reports/finetune/rows/toy-split/seed{seed}",
            f"finetune.out_dir=artifacts/finetune/toy-split-seed{seed}",
            f"finetune.curve=reports/finetune/curves/toy-split-seed{seed}.csv",
        )
    entry_stage("finetune_summary")(stage_config("summary.comparisons=[]"))
    rows = json.loads((workspace / "reports/finetune/summary.json").read_text())["rows"]
    whole, split = rows["toy"], rows["toy-split"]
    assert split.keys() == whole.keys()
    assert split == pytest.approx(whole)
    assert whole["test_accuracy_std"] > 0  # the seeds differ, so the std is the merge's, not a copy
    table = (workspace / "reports/finetune/summary.md").read_text().splitlines()
    line = next(line for line in table if line.startswith("| toy-split |"))
    assert "| 3 (0, 1, 2) |" in line

    rows_dir = workspace / "reports/finetune/rows/toy-split"
    shutil.copy(rows_dir / "seed0/run.json", rows_dir / "run.json")
    with pytest.raises(DataError, match=r"holds a run \(run.json\) and runs of single seeds \(seed0, seed1"):
        entry_stage("finetune_summary")(stage_config("summary.comparisons=[]"))
    (rows_dir / "run.json").unlink()
    shutil.copytree(rows_dir / "seed0", rows_dir / "again")
    with pytest.raises(DataError, match=r"repeat seeds \(\[0, 0, 1, 2\]\)"):
        entry_stage("finetune_summary")(stage_config("summary.comparisons=[]"))
    run = json.loads((rows_dir / "again/run.json").read_text())
    (rows_dir / "again/run.json").write_text(json.dumps({**run, "seeds": [5], "max_len": 7}))
    with pytest.raises(DataError, match="its runs differ in max_len; expected runs of one row"):
        entry_stage("finetune_summary")(stage_config("summary.comparisons=[]"))


def test_summary_reads_the_rows_a_comparison_names_from_reference_folders(workspace):
    """A stage's own rows, compared with rows of another stage (reference_dirs): only the named
    reference rows join the table, and the difference is the one of the two rows' seeds."""
    finetune("finetune.max_steps=8", "finetune.seeds=[0,1]")
    finetune("finetune.max_steps=8", "run_name=toy-other")
    elsewhere = [
        f"finetune.{k}=other/{v}"
        for k, v in (("reports_dir", "rows/toy-frozen"), ("out_dir", "art"), ("curve", "curve.csv"))
    ]
    finetune(
        "finetune.max_steps=8", "finetune.seeds=[0,1]", "adapt=frozen", "run_name=toy-frozen", *elsewhere
    )
    entry_stage("finetune_summary")(
        stage_config(
            "summary.rows_dir=other/rows",
            "summary.out_dir=other",
            "summary.reference_dirs=[reports/finetune/rows]",
            "summary.comparisons=[{a:toy-frozen,b:toy,claim:freezing is enough,margin:50}]",
        )
    )
    table = (workspace / "other/summary.md").read_text()
    assert {line.split(" | ")[0] for line in table.splitlines() if line.startswith("| toy")} == {
        "| toy",
        "| toy-frozen",
    }  # toy-other is not named by a comparison
    runs = [
        json.loads((workspace / f"{d}/{r}/run.json").read_text())
        for d, r in (("other/rows", "toy-frozen"), ("reports/finetune/rows", "toy"))
    ]
    a, b = (r["test_per_seed"]["accuracy"] for r in runs)
    numbers = json.loads((workspace / "other/summary.json").read_text())
    assert numbers["comparisons"]["toy-frozen-vs-toy"]["difference"] == pytest.approx(
        paired(dict(enumerate(a)), dict(enumerate(b))).mean
    )
    assert set(numbers["rows"]) == {"toy", "toy-frozen"}
    assert numbers["comparisons"]["toy-frozen-vs-toy"]["margin"] == 0.5
    claim = next(line for line in table.splitlines() if line.startswith("| freezing is enough"))
    assert "; within 50 points: " in claim  # the difference's verdict, then the claim's
    with pytest.raises(ConfigError, match="margin of toy-frozen vs toy: got -1"):
        entry_stage("finetune_summary")(
            stage_config(
                "summary.comparisons=[{a:toy-frozen,b:toy,margin:-1}]", "summary.rows_dir=other/rows"
            )
        )


def test_summary_refuses_a_comparison_across_tasks_or_of_a_missing_row(workspace):
    finetune("finetune.max_steps=8")
    with pytest.raises(DataError, match="row 'nope' is not under the rows folder"):
        entry_stage("finetune_summary")(stage_config("summary.comparisons=[{a:toy,b:nope}]"))


def test_a_new_task_is_only_a_yaml(workspace):
    """conf/task/example_local.yaml: a local TSV/JSONL folder, built by the task stage and fine-tuned
    by the finetune stage with no code of its own."""
    folder = Path(__file__).resolve().parents[1] / "tasks/fixtures/local_folder"
    cfg = stage_config("task=example_local", f"task.params.path={folder}")
    built = entry_stage("task")(cfg)
    assert built.metrics["test_examples"] == 2.0
    result = finetune(f"task.params.path={folder}", "finetune.max_steps=4")
    assert 0.0 <= result.metrics["test_accuracy"] <= 1.0
    assert "baseline_tfidf_logreg_accuracy" in result.metrics


@pytest.mark.slow
def test_ddp_on_two_cpu_processes_fine_tunes_and_logs_once(workspace):
    """The trainer group reaches fine-tuning: two gloo processes, each training on its shard and
    validating on the whole val sample, agree on when to stop; rank zero alone writes and logs."""
    uri = f"sqlite:///{workspace}/ddp.db"
    base = ["experiment=smoke", "task=example_local", "run_name=ddp", *SHORT, "trainer=ddp_cpu"]
    result = entry_point("finetune.py", *base, cwd=workspace, env={"MLFLOW_TRACKING_URI": uri})
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((workspace / "reports/finetune/rows/ddp/metrics.json").read_text())
    assert 0.0 <= metrics["test_accuracy"] <= 1.0 and metrics["steps"] >= 8
    assert (workspace / "artifacts/finetune/ddp/seed0/best.ckpt").is_file()
    runs = mlflow_runs(uri)
    rows = runs[runs["tags.mlflow.parentRunId"].isna()]
    assert len(rows) == 1 and len(runs) == 2  # rank zero only: the row's run and its seed's child
    assert rows.iloc[0]["params.trainer.strategy"] == "ddp" and rows.iloc[0]["params.trainer.devices"] == "2"
    assert rows.iloc[0]["metrics.test_accuracy"] == pytest.approx(metrics["test_accuracy"])


def test_warmup_is_a_share_of_the_run_so_a_short_run_is_not_refused():
    from lmforge.finetune.config import FinetuneConfig

    assert FinetuneConfig(max_steps=200, warmup_ratio=0.1).warmup_steps == 20
    assert FinetuneConfig(max_steps=2000, warmup_ratio=0.06).warmup_steps == 120
    assert FinetuneConfig(max_steps=5, warmup_ratio=0.1).warmup_steps == 0  # was refused at warmup 20
    assert FinetuneConfig(max_steps=5, warmup_ratio=0.1).run_optim().warmup_steps == 0


def test_a_row_hands_tracking_its_best_validation_seed_as_a_model_that_answers_raw_rows(workspace):
    from lmforge.finetune.predict import Predictor
    from lmforge.tokenizer.specials import load_tokenizer

    result = finetune("finetune.seeds=[0,1]")
    model = result.model
    run = json.loads((workspace / "reports/finetune/rows/toy/run.json").read_text())
    seed = int(Path(model.checkpoint).parent.name.removeprefix("seed"))
    assert model.checkpoint == f"artifacts/finetune/toy/seed{seed}/best.ckpt" and seed in (0, 1)
    assert Path(model.tokenizer).read_text() == tiny_wordpiece().to_str(pretty=True)
    test = stage.sample(records(10, 2), None, 0)
    assert model.family == "encoder" and model.example == {"text": test[0]["text"]}
    predicted = Predictor(model.checkpoint, load_tokenizer(model.tokenizer)).predict(
        [{"text": r["text"]} for r in test]
    )
    accuracy = sum(p == r["label"] for p, r in zip(predicted, test)) / len(test)
    assert accuracy == run["test_per_seed"]["accuracy"][seed]  # the score the row reported for that seed


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ([], "artifacts/pretrain/encoder"),  # the pretrain run's out_dir: MLflow links the row to it
        (["finetune.init=scratch"], None),
        (["finetune.init=hf:minilm"], "hf:minilm"),
        (["finetune=student", "finetune.backbone=encoder-student"], "artifacts/distill/encoder-student"),
    ],
)
def test_a_row_names_the_model_it_starts_from(overrides, expected):
    cfg = stage_config("task=example_local", "run_name=toy", *overrides)
    plan = entry_stage("finetune").visible(cfg)
    assert stage.starts_from(plan) == expected


def test_a_row_can_start_from_a_checkpoint_kept_along_pretraining(workspace):
    """`finetune.checkpoint=step<N>`: the pretraining compute a row starts from (issue 25's curve of
    downstream score against pretraining steps); a checkpoint the run did not keep is one line."""
    kept = workspace / "artifacts/pretrain/encoder"
    (kept / "step1.ckpt").write_bytes((kept / "best.ckpt").read_bytes())
    finetune("finetune.checkpoint=step1", "finetune.max_steps=8")
    run = json.loads((workspace / "reports/finetune/rows/toy/run.json").read_text())
    assert run["checkpoint"] == "step1" and "step1.ckpt" in run["source"]
    with pytest.raises(
        DataError, match=r"finetune.checkpoint: .*step9.ckpt does not exist; the run kept: best, step1"
    ):
        finetune("finetune.checkpoint=step9")
    with pytest.raises(ConfigError, match="finetune.checkpoint: got '../best', expected best or step<N>"):
        finetune("finetune.checkpoint=../best")


def test_a_row_run_twice_leaves_the_same_bytes(workspace):
    """Everything a summary, a distillation or findings reads of a row is decided by its inputs:
    run twice, its reports, curve and exported models are byte-identical (the clock: timings file)."""
    folders = ("reports/finetune/rows/toy", "reports/finetune/curves", "artifacts/finetune/toy")

    def files() -> dict[str, bytes]:
        return {str(p): p.read_bytes() for f in folders for p in sorted(Path(f).rglob("*")) if p.is_file()}

    finetune("finetune.max_steps=8")
    first = files()
    finetune("finetune.max_steps=8")
    again = files()
    assert "artifacts/finetune/toy/seed0/best.ckpt" in first and sorted(again) == sorted(first)
    assert [name for name in first if again[name] != first[name]] == []
