"""The MLflow side of a stage run: which files are uploaded where, what a child inherits, which
invocation a run hangs from, and the model a training stage logs: loadable by name and alias,
predicting on raw text, promoted to `champion` only when its score beats the champion's."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import mlflow
import pandas as pd
import psutil
import pytest
import torch
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from tokenizers import Tokenizer

import lmforge
from helpers import SeedPlan
from lmforge.door import execute
from lmforge.logged_model import code_archive, log_text_model, requirements
from lmforge.model.config import ModelConfig
from lmforge.stage import Stage, StageResult, TrainedModel
from lmforge.tokenizer.builders import build_bpe, build_wordpiece
from lmforge.tokenizer.config import Kind, TokenizerConfig
from lmforge.tracking.record import artifact_folder
from lmforge.tracking.registry import register
from lmforge.tracking.runs import inherited_tags, invocation, this_process
from lmforge.training.config import ObjectiveConfig, ObjectiveKind, OptimConfig
from lmforge.training.module import PretrainModule

TEXT = ["The jury said that the city had no evidence that the election was fair."] * 30


def test_reports_and_figures_go_to_fixed_folders_and_checkpoints_and_data_nowhere(tmp_path):
    files = {"loss.png": b"x", "val_loss.csv": b"x", "metrics.json": b"{}", "summary.md": b"#",
             "best.ckpt": b"x", "train.jsonl": b"{}", "tokens.npy": b"x", "big.json": b"x" * 5_000_001}  # fmt: skip
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    folders = {name: artifact_folder(tmp_path / name) for name in files}
    assert folders == {"loss.png": "plots", "val_loss.csv": "plots", "metrics.json": "report",
                       "summary.md": "report", "best.ckpt": None, "train.jsonl": None, "tokens.npy": None,
                       "big.json": None}  # fmt: skip


def test_a_child_keeps_its_parents_provenance_under_its_own_job_name():
    parent = {"git_commit": "abc", "git_dirty": "false", "dvc_stage": "finetune", "lmforge_job": "finetune@pos",
              "experiment": "smoke", "data_hash": "d1", "seed": "1234", "out_dir": "x", "mlflow.runName": "r"}  # fmt: skip
    child = inherited_tags(parent, "seed 2")
    assert child["lmforge_job"] == "finetune@pos/seed 2" and child["dvc_stage"] == "finetune"
    assert "out_dir" not in child and "mlflow.runName" not in child and child["git_commit"] == "abc"


def test_a_named_pipeline_groups_runs_and_a_lone_run_has_no_parent(monkeypatch):
    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.delenv("LMFORGE_PIPELINE", raising=False)
    assert invocation() is None
    monkeypatch.setenv("LMFORGE_PIPELINE", "nightly")
    assert invocation() == ("env-nightly", "nightly")


def test_a_run_continued_by_a_later_invocation_stays_under_the_one_it_started_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_STAGE", raising=False)
    resume = []
    stage = Stage(
        "sweep",
        lambda plan: StageResult({"loss": 1.0}, []),
        SeedPlan,
        will_resume=lambda p: bool(resume),
    )
    uri = f"sqlite:///{tmp_path}/mlruns.db"
    cfg = OmegaConf.create(
        {"seed": 1, "logger": {"enabled": True, "tracking_uri": uri, "experiment": "test"}}
    )
    monkeypatch.setenv("LMFORGE_PIPELINE", "first")
    execute(stage, cfg)
    monkeypatch.setenv("LMFORGE_PIPELINE", "second")
    resume.append(True)  # the second invocation continues the first one's run
    execute(stage, cfg)
    client = MlflowClient(tracking_uri=uri)
    runs = {
        r.data.tags.get("lmforge_invocation", r.data.tags.get("lmforge_job")): r
        for r in client.search_runs(["1"])
    }
    assert set(runs) == {"env-first", "env-second", "sweep"}  # one run of the stage, continued
    sweep = runs["sweep"].data.tags
    assert sweep["mlflow.parentRunId"] == runs["env-first"].info.run_id
    assert sweep["lmforge_resumed_by"] == runs["env-second"].info.run_id
    assert runs["env-second"].info.status == "FINISHED"  # the invocation that did the work ends with it
    mlflow.set_tracking_uri(None)


def checkpoint(tmp_path, family: str, vocab: int, objective: str | None = None) -> str:
    values = dict(vocab_size=vocab, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_seq_len=32)
    if family == "encoder":
        values.update(family="encoder", head_transform=True, head_bias=True)
    if family == "encoder_decoder":
        values.update(family="encoder_decoder", position="sinusoidal")
    kind = ObjectiveKind(objective or ("mlm" if family == "encoder" else "clm"))
    torch.manual_seed(0)
    module = PretrainModule(ModelConfig(**values), ObjectiveConfig(kind=kind), OptimConfig(), max_steps=1)
    path = tmp_path / f"{family}.ckpt"
    torch.save({"hyper_parameters": dict(module.hparams), "state_dict": module.state_dict()}, path)
    return str(path)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default artifact root is relative to the working directory
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlruns.db")
    mlflow.set_experiment("test")
    yield MlflowClient()
    mlflow.set_tracking_uri(None)


def test_the_logged_decoder_is_registered_by_score_and_continues_text(tmp_path, store):
    tokenizer = tmp_path / "bpe.json"
    build_bpe(TokenizerConfig(name="bpe", kind=Kind.bpe, vocab_size=300, n_sentinels=2), [TEXT]).save(
        str(tokenizer)
    )
    vocab = Tokenizer.from_file(str(tokenizer)).get_vocab_size()
    model = TrainedModel(checkpoint(tmp_path, "decoder", vocab), str(tokenizer), "decoder")
    versions = []
    for loss in (5.0, 6.0, 4.0):  # the second is worse: a candidate, not the champion
        with mlflow.start_run(tags={"lmforge_job": "pretrain@decoder"}) as trained:
            mlflow.set_tag("lmforge_model_uri", log_text_model(model))
        with mlflow.start_run() as evaluation:
            register(
                store,
                trained.info.run_id,
                {"test_loss": loss},
                ("test_loss", "min"),
                "none",
                evaluation.info.run_id,
            )
        versions.append(store.get_model_version_by_alias("lmforge-pretrain-decoder", "candidate").version)
        champion = store.get_model_version_by_alias("lmforge-pretrain-decoder", "champion").version
        assert champion == versions[{5.0: 0, 6.0: 0, 4.0: 2}[loss]]
    loaded = mlflow.pyfunc.load_model("models:/lmforge-pretrain-decoder@champion")
    out = loaded.predict(pd.DataFrame({"text": ["The jury said", "The city"]}), params={"max_new_tokens": 3})
    assert len(out) == 2 and all(isinstance(text, str) for text in out)


def test_the_logged_encoder_fills_its_masks(tmp_path, store):
    tokenizer = tmp_path / "wordpiece.json"
    config = TokenizerConfig(name="wordpiece", kind=Kind.wordpiece, vocab_size=200, n_sentinels=0)
    build_wordpiece(config, [TEXT]).save(str(tokenizer))
    vocab = Tokenizer.from_file(str(tokenizer)).get_vocab_size()
    with mlflow.start_run():
        uri = log_text_model(TrainedModel(checkpoint(tmp_path, "encoder", vocab), str(tokenizer), "encoder"))
    out = mlflow.pyfunc.load_model(uri).predict(pd.DataFrame({"text": ["the jury said that the [MASK] had"]}))
    assert "[mask]" not in out[0].lower()  # filled by a token of the vocabulary (a random model's: any)
    assert out[0].startswith("the jury said that") and out[0].endswith(" had")  # the rest kept


def test_the_logged_translation_model_translates(tmp_path, store):
    tokenizer = tmp_path / "bpe.json"
    build_bpe(TokenizerConfig(name="bpe", kind=Kind.bpe, vocab_size=300, n_sentinels=0), [TEXT]).save(
        str(tokenizer)
    )
    vocab = Tokenizer.from_file(str(tokenizer)).get_vocab_size()
    trained = checkpoint(
        tmp_path, "encoder_decoder", vocab, objective="seq2seq"
    )  # what translate_train writes
    with mlflow.start_run():
        uri = log_text_model(TrainedModel(trained, str(tokenizer), "encoder_decoder"))
    out = mlflow.pyfunc.load_model(uri).predict(pd.DataFrame({"text": ["The jury said", "The city"]}))
    assert len(out) == 2 and all(isinstance(text, str) for text in out)


def test_a_fine_tuned_row_is_registered_per_task_and_answers_raw_rows(tmp_path, store):
    """A fine-tuning row logs its model with a row of its task as the input example; the registry keeps
    one model per task (`lmforge-finetune-<task>`), its champion the row with the best score."""
    from finetune.test_predict import module_and_rows, saved

    from helpers import tiny_wordpiece
    from lmforge.finetune.predict import example
    from lmforge.tasks.config import Kind

    tokenizer = tmp_path / "tokenizer.json"
    tiny_wordpiece().save(str(tokenizer))
    module, rows, _ = module_and_rows("pair_classification", "encoder", "accuracy")
    model = TrainedModel(
        saved(tmp_path, module), str(tokenizer), "encoder", example(Kind.pair_classification, rows[0])
    )
    for row, score in (("encoder-pairs", 0.6), ("scratch-pairs", 0.5)):
        with mlflow.start_run(tags={"lmforge_job": f"finetune@{row}"}) as run:
            mlflow.set_tag("lmforge_model_uri", log_text_model(model))
            register(store, run.info.run_id, {"test/score": score}, ("test/score", "max"), "none",
                      run.info.run_id, "finetune-pairs")  # fmt: skip
    champion = store.get_model_version_by_alias("lmforge-finetune-pairs", "champion")
    assert int(champion.version) == 1 and champion.tags["test/score"] == "0.6"
    assert int(store.get_model_version_by_alias("lmforge-finetune-pairs", "candidate").version) == 2
    loaded = mlflow.pyfunc.load_model("models:/lmforge-finetune-pairs@champion")
    out = loaded.predict(pd.DataFrame([example(Kind.pair_classification, row) for row in rows]))
    assert len(out) == len(rows) and set(out) <= {"other", "same"}
    assert loaded.metadata.get_input_schema().input_names() == ["text", "text_pair"]
    described = store.get_model_version("lmforge-finetune-pairs", champion.version).description
    assert "finetune@encoder-pairs" in described and "test/score = 0.6 (higher is better)" in described
    assert 'load_model("models:/lmforge-finetune-pairs@champion")' in described
    assert '{"text": ["..."], "text_pair": ["..."]}' in described and "is code" in described


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_server_stops_the_stage_at_the_start_in_one_line(tmp_path, monkeypatch, capsys):
    """Issue 53 (b): no minutes of retries and tracebacks; one line naming the URI and the choices,
    exit 2, before the stage has done or written anything."""
    monkeypatch.chdir(tmp_path)
    worked = []
    stage = Stage("job", lambda plan: worked.append(1) or StageResult({}, []), SeedPlan)
    uri = f"http://127.0.0.1:{free_port()}"
    cfg = OmegaConf.create({"seed": 1, "logger": {"enabled": True, "tracking_uri": uri, "experiment": "t"}})
    started = time.monotonic()
    with pytest.raises(SystemExit) as stopped:
        execute(stage, cfg)
    assert stopped.value.code == 2 and time.monotonic() - started < 15 and not worked
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and uri in err[0] and "logger=none" in err[0] and "MLFLOW_TRACKING_URI" in err[0]
    assert not (tmp_path / "mlruns").exists()
    mlflow.set_tracking_uri(None)


def test_a_run_whose_process_is_gone_is_marked_killed_by_the_next_invocation(tmp_path, monkeypatch):
    """Issue 53 (c): a `dvc repro` killed with its stage leaves both runs RUNNING; the next
    invocation marks every RUNNING run of this host whose process is gone KILLED, and leaves a live
    process's run and another host's run alone."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LMFORGE_PIPELINE", "after")
    uri = f"sqlite:///{tmp_path}/mlruns.db"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("test")
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = f"{gone.pid}-{int(time.time())}"
    host = socket.gethostname()
    tagged = {
        "killed parent": {"lmforge_host": host, "lmforge_process": dead, "lmforge_invocation": f"dvc-{dead}"},
        "killed stage": {"lmforge_host": host, "lmforge_process": dead},
        "live": {"lmforge_host": host, "lmforge_process": this_process()},
        "other host": {"lmforge_host": f"not-{host}", "lmforge_process": dead},
        "no process": {},
    }
    ids = {
        name: client.create_run(experiment, run_name=name, tags=tags).info.run_id
        for name, tags in tagged.items()
    }
    stage = Stage("job", lambda plan: StageResult({"loss": 1.0}, []), SeedPlan)
    cfg = OmegaConf.create(
        {"seed": 1, "logger": {"enabled": True, "tracking_uri": uri, "experiment": "test"}}
    )
    execute(stage, cfg)
    status = {name: client.get_run(run_id).info.status for name, run_id in ids.items()}
    assert status == {"killed parent": "KILLED", "killed stage": "KILLED", "live": "RUNNING",
                      "other host": "RUNNING", "no process": "RUNNING"}  # fmt: skip
    ours = client.search_runs([experiment], filter_string="tags.lmforge_job = 'job'")
    assert [r.info.status for r in ours] == ["FINISHED"] and ours[0].data.tags[
        "lmforge_process"
    ] == this_process()
    mlflow.set_tracking_uri(None)


MULTIRUN_STAGE = """
import json, os, signal, sys
from mlflow.tracking import MlflowClient
from lmforge.door import cli
from dataclasses import dataclass
from lmforge.stage import Plan, Stage, StageResult, read

@dataclass(frozen=True, kw_only=True, eq=False)
class SeedPlan(Plan):
    seed: int = read(int)

def work(plan):
    client = MlflowClient()
    levels = {}
    for run in client.search_runs(["1"], filter_string="tags.lmforge_level != ''"):
        levels[run.data.tags["lmforge_level"]] = run.info.status  # one stage run, one pipeline run
    with open("seen.jsonl", "a") as f:
        f.write(json.dumps({"seed": plan.seed, "pid": os.getpid(), **levels}) + "\\n")
    if plan.seed == int(os.environ.get("KILL_AT_SEED", "0")):
        os.killpg(os.getpgid(0), signal.SIGKILL)  # kill -9 of the whole `dvc repro`
    return StageResult({"loss": float(plan.seed)}, [])

STAGE = Stage("job", work, SeedPlan)
if __name__ == "__main__":
    cli(STAGE, __file__)
"""

FAKE_DVC = """
import subprocess, sys
sys.exit(subprocess.call(sys.argv[2:]))
"""


def run_rows_under_dvc(
    tmp_path: Path,
    kill_at_seed: int = 0,
    named: str | None = None,
    rows: tuple[str, ...] = ("--multirun", "seed=1,2,3"),
) -> tuple[list[dict], str]:
    """Three rows of a Hydra multirun of a tracked stage, run by a process named `dvc` as DVC runs
    a stage; the row with seed `kill_at_seed` kills them all. Returns what each row saw of the
    stage's and the pipeline's runs, and the store's uri."""
    uri = f"sqlite:///{tmp_path}/mlruns.db"
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "config.yaml").write_text(
        f"seed: 0\nlogger: {{enabled: true, tracking_uri: '{uri}', experiment: test}}\n"
    )
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "job.py").write_text(MULTIRUN_STAGE)
    (tmp_path / "dvc").write_text(FAKE_DVC)
    env = {**os.environ, "DVC_STAGE": "job", "KILL_AT_SEED": str(kill_at_seed)}
    env.pop("LMFORGE_PIPELINE", None)
    if named:  # an invocation named by the user, with a stage before this one that ended its run
        env["LMFORGE_PIPELINE"] = named
        env.pop("DVC_STAGE")
        cfg = OmegaConf.create(
            {"seed": 0, "logger": {"enabled": True, "tracking_uri": uri, "experiment": "test"}}
        )
        os.environ["LMFORGE_PIPELINE"] = named
        try:
            execute(Stage("before", lambda plan: StageResult({}, []), SeedPlan), cfg)
        finally:
            del os.environ["LMFORGE_PIPELINE"]
            mlflow.set_tracking_uri(None)
    command = [sys.executable, "dvc", "repro", sys.executable, "pipelines/job.py", *rows]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          start_new_session=True)  # fmt: skip
    assert done.returncode == (-9 if kill_at_seed else 0), done.stderr[-3000:]
    seen = [json.loads(line) for line in (tmp_path / "seen.jsonl").read_text().splitlines()]
    deadline = time.monotonic() + 30
    while psutil.pid_exists(seen[-1]["pid"]) and time.monotonic() < deadline:  # killed: it may take a moment
        time.sleep(0.05)
    return seen, uri


def statuses(uri: str) -> dict[str, str]:
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs(["1"])

    def name(tags: dict[str, str]) -> str:
        if tags.get("lmforge_level") == "pipeline":
            return "pipeline " + tags["lmforge_invocation"].split("-")[0]  # dvc-<pid>-<start>, env-<name>
        return tags.get("lmforge_level") or tags["seed"]

    return {name(r.data.tags): r.info.status for r in runs}


def test_a_multiruns_stage_and_pipeline_runs_stay_running_through_its_rows_and_end_with_it(tmp_path):
    """Issue 53 (c): each row of a multirun under DVC sees its stage's run and the pipeline's run
    RUNNING (an earlier row's end does not end them), and both end FINISHED with the process."""
    seen, uri = run_rows_under_dvc(tmp_path)
    assert [row["seed"] for row in seen] == [1, 2, 3]
    assert all(row["stage"] == row["pipeline"] == "RUNNING" for row in seen), seen
    assert statuses(uri) == {"stage": "FINISHED", "pipeline dvc": "FINISHED", "1": "FINISHED", "2": "FINISHED",
                             "3": "FINISHED"}  # fmt: skip
    mlflow.set_tracking_uri(None)


def test_a_dvc_repro_killed_between_rows_leaves_its_stage_and_pipeline_runs_killed(tmp_path, monkeypatch):
    """Issue 53 (c): `kill -9` of `dvc repro` after the first of three rows: the next invocation
    finds the stage's and the pipeline's runs RUNNING without their processes and marks them
    KILLED (they did not finish: two rows never ran), the finished row stays FINISHED."""
    seen, uri = run_rows_under_dvc(tmp_path, kill_at_seed=2)
    assert [row["seed"] for row in seen] == [1, 2]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.setenv("LMFORGE_PIPELINE", "after")
    cfg = OmegaConf.create(
        {"seed": 9, "logger": {"enabled": True, "tracking_uri": uri, "experiment": "test"}}
    )
    execute(Stage("next", lambda plan: StageResult({}, []), SeedPlan), cfg)
    assert statuses(uri) == {"stage": "KILLED", "pipeline dvc": "KILLED", "1": "FINISHED", "2": "KILLED",
                             "pipeline env": "FINISHED", "9": "FINISHED"}  # fmt: skip
    mlflow.set_tracking_uri(None)


def test_a_named_pipelines_run_takes_its_running_stages_process_and_is_killed_with_it(tmp_path, monkeypatch):
    """Issue 53 (c) for `LMFORGE_PIPELINE=<name>`: the pipeline's run names no process of its own, so
    each stage under it lends it its own; a stage killed mid-work leaves it RUNNING with a process that
    is gone, and the next invocation marks it KILLED (it was FINISHED by the stage before)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_STAGE", raising=False)
    seen, uri = run_rows_under_dvc(tmp_path, kill_at_seed=3, named="nightly", rows=("seed=3",))
    assert [row["seed"] for row in seen] == [3] and seen[0]["pipeline"] == "RUNNING"  # reopened
    monkeypatch.setenv("LMFORGE_PIPELINE", "after")
    cfg = OmegaConf.create(
        {"seed": 9, "logger": {"enabled": True, "tracking_uri": uri, "experiment": "test"}}
    )
    execute(Stage("next", lambda plan: StageResult({}, []), SeedPlan), cfg)
    assert statuses(uri)["3"] == "KILLED"
    client = MlflowClient(tracking_uri=uri)
    named = client.search_runs(["1"], filter_string="tags.lmforge_invocation = 'env-nightly'")
    assert [r.info.status for r in named] == ["KILLED"]
    mlflow.set_tracking_uri(None)


def test_the_logged_model_pins_what_it_needs_and_loads_where_lmforge_is_not_installed(tmp_path, store):
    """Issue 53 item 6: every requirement pinned, torch as the index names it, and lmforge shipped
    with the model (a zip of its code) instead of an unpinned `lmforge` pip cannot find."""
    pinned = requirements()
    assert pinned and all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[0-9][^+\s]*", r) for r in pinned), pinned
    assert "torch==" + torch.__version__.split("+")[0] in pinned
    assert not any(r.startswith("lmforge") for r in pinned)
    assert code_archive() == code_archive()  # built once per content
    assert "lmforge/serving.py" in zipfile.ZipFile(code_archive()).namelist()
    tokenizer = tmp_path / "bpe.json"
    build_bpe(TokenizerConfig(name="bpe", kind=Kind.bpe, vocab_size=300, n_sentinels=2), [TEXT]).save(
        str(tokenizer)
    )
    vocab = Tokenizer.from_file(str(tokenizer)).get_vocab_size()
    with mlflow.start_run():
        uri = log_text_model(TrainedModel(checkpoint(tmp_path, "decoder", vocab), str(tokenizer), "decoder"))
    src = str(Path(lmforge.__file__).parents[1])
    code = (
        "import importlib.util, sys\n"
        f"sys.path = [p for p in sys.path if p != {src!r}]\n"  # the editable install's one entry
        "assert importlib.util.find_spec('lmforge') is None\n"
        "import mlflow, pandas as pd\n"
        f"mlflow.set_tracking_uri({mlflow.get_tracking_uri()!r})\n"
        f"out = mlflow.pyfunc.load_model({uri!r}).predict(pd.DataFrame({{'text': ['The jury said']}}), "
        "params={'max_new_tokens': 2})\n"
        "import lmforge\n"
        "print(type(out[0]).__name__, lmforge.__file__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    kind, where = done.stdout.split()[-2:]
    assert kind == "str" and ".zip" in where and not where.startswith(src)


@pytest.mark.slow
def test_mlflow_models_serve_answers_a_request_for_the_registered_champion(tmp_path, store):
    """Issue 53 (f): `mlflow models serve -m models:/<name>@champion` answers an HTTP request with a
    label (in this environment: `--env-manager local`)."""
    from finetune.test_predict import module_and_rows, saved

    from helpers import tiny_wordpiece
    from lmforge.finetune.predict import example
    from lmforge.tasks.config import Kind as TaskKind

    tokenizer = tmp_path / "tokenizer.json"
    tiny_wordpiece().save(str(tokenizer))
    module, rows, _ = module_and_rows("pair_classification", "encoder", "accuracy")
    model = TrainedModel(
        saved(tmp_path, module), str(tokenizer), "encoder", example(TaskKind.pair_classification, rows[0])
    )
    with mlflow.start_run(tags={"lmforge_job": "finetune@encoder-pairs"}) as run:
        mlflow.set_tag("lmforge_model_uri", log_text_model(model))
        register(store, run.info.run_id, {"test/score": 0.6}, ("test/score", "max"), "none", run.info.run_id,
                 "finetune-pairs")  # fmt: skip
    port = free_port()
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow.get_tracking_uri()}
    command = ["mlflow", "models", "serve", "-m", "models:/lmforge-finetune-pairs@champion",
               "--env-manager", "local", "-h", "127.0.0.1", "-p", str(port)]  # fmt: skip
    server = subprocess.Popen(
        command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2).close()
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()[-2000:]
                assert time.monotonic() < deadline, "the model server did not start"
                time.sleep(1)
        pairs = [example(TaskKind.pair_classification, row) for row in rows[:3]]
        body = {
            "dataframe_split": {
                "columns": ["text", "text_pair"],
                "data": [[p["text"], p["text_pair"]] for p in pairs],
            }
        }
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/invocations",
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            predictions = json.loads(answer.read())["predictions"]
        assert len(predictions) == 3 and set(predictions) <= {"other", "same"}
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_child_run_that_trains_has_params_inputs_and_system_metrics_like_its_parent(tmp_path, monkeypatch):
    """Issue 53 item 7: a fine-tuning seed's run (the one with the curves) is a training run like any
    other: its stage's config and its seed as params, the stage's datasets, system metrics."""
    from lmforge.stage import DataInput
    from lmforge.tracking import close_child, open_child

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.delenv("LMFORGE_PIPELINE", raising=False)
    (tmp_path / "train.jsonl").write_text("{}\n")

    def work(plan) -> StageResult:
        for seed in (0, 1):
            child = open_child(f"seed {seed}", {"seed": str(seed)})
            MlflowClient(tracking_uri=child[1]).log_metric(child[0], "train/loss", 1.0, step=1)
            close_child(child, {"test/score": 0.5})
        data = DataInput(str(tmp_path / "train.jsonl"), (str(tmp_path / "train.jsonl"),), 1)
        return StageResult({"test/score": 0.5}, [], inputs={"train": data})

    uri = f"sqlite:///{tmp_path}/mlruns.db"
    cfg = OmegaConf.create({"seed": 7, "logger": {"enabled": True, "tracking_uri": uri, "experiment": "t"}})
    execute(Stage("rows", work, SeedPlan), cfg)
    client = MlflowClient(tracking_uri=uri)
    parent = client.search_runs(["1"], "tags.lmforge_job = 'rows'")[0]
    children = client.search_runs(["1"], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert len(children) == 2
    for child in children:
        assert child.data.params["seed"] == child.data.tags["seed"]  # its own seed over the stage's 7
        assert [d.dataset.name for d in child.inputs.dataset_inputs] == ["train.jsonl/train"]
        assert any(k.startswith("system/") for k in child.data.metrics), child.data.metrics
        assert child.info.status == "FINISHED" and child.data.metrics["test/score"] == 0.5
    mlflow.set_tracking_uri(None)
