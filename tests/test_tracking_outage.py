"""Issue 53 (a): a real `mlflow server` on 127.0.0.1, killed mid-run for the rest of the run (longer
than MLflow's retries of a request): training never waits on it, the run exits 0 within 1.2x the
time of an undisturbed run with its local curve complete, and once the server is back the backfill
gives the MLflow run every step and ends it FINISHED."""

from __future__ import annotations

import contextlib
import csv
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import lightning as L
import mlflow
import pytest
import torch
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from helpers import SeedPlan
from lmforge.door import execute
from lmforge.stage import Stage, StageResult
from lmforge.tracking import active_run
from lmforge.training.config import TrainerConfig
from lmforge.training.trainer import build_trainer

STEPS, STEP_SECONDS = 60, 0.4
KILL_AT = 18


class Tiny(L.LightningModule):
    def __init__(self, progress: list[int]) -> None:
        super().__init__()
        self.layer, self.progress, self.losses = torch.nn.Linear(4, 1), progress, []

    def training_step(self, batch, batch_idx):
        time.sleep(STEP_SECONDS)  # a step's worth of work
        loss = self.layer(batch[0]).pow(2).mean()
        self.log("train/loss", loss)
        self.losses.append(float(loss))
        self.progress.append(len(self.losses))
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def work_with(progress: list[int], out: Path):
    def work(plan) -> StageResult:
        torch.manual_seed(0)
        module = Tiny(progress)
        data = torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(torch.randn(STEPS * 4, 4)), batch_size=4
        )
        config = TrainerConfig(
            max_steps=STEPS, log_every_n_steps=1, enable_progress_bar=False, gradient_clip_val=None
        )
        trainer = build_trainer(
            config, mlflow_run=active_run(), enable_checkpointing=False, limit_val_batches=0
        )
        trainer.fit(module, data)
        curve = out / "train_loss.csv"
        with open(curve, "w", newline="") as f:
            csv.writer(f).writerows([["step", "train_loss"], *enumerate(module.losses, 1)])
        return StageResult({"final_loss": module.losses[-1]}, [str(curve)])

    return work


def start_server(store: Path, port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{store}",
            "--artifacts-destination",
            str(store.parent / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],  # fmt: skip
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its workers are its children: killed with it, as a group
    )
    deadline = time.monotonic() + 180
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).close()
            return server
        except OSError:
            assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.5)


def stop(server: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGKILL)
    server.wait(timeout=30)


@pytest.mark.slow
def test_a_server_killed_mid_run_costs_the_run_nothing_and_the_backfill_completes_it(
    tmp_path, monkeypatch, capsys
):
    from test_team_server import free_port

    monkeypatch.chdir(tmp_path)
    port, store = free_port(), tmp_path / "server" / "mlflow.db"
    store.parent.mkdir()
    uri = f"http://127.0.0.1:{port}"
    cfg = OmegaConf.create(
        {
            "seed": 1,
            "logger": {"enabled": True, "tracking_uri": uri, "experiment": "outage", "flush_timeout_s": 1},
        }
    )
    server = start_server(store, port)
    try:
        calm = tmp_path / "calm"
        calm.mkdir()
        began = time.perf_counter()
        execute(Stage("calm", work_with([], calm), SeedPlan), cfg)
        undisturbed = time.perf_counter() - began

        progress: list[int] = []
        killer = threading.Thread(target=lambda: (wait_for(progress, KILL_AT), stop(server)))
        killer.start()
        capsys.readouterr()
        began = time.perf_counter()
        execute(Stage("outage", work_with(progress, tmp_path), SeedPlan), cfg)  # returns: exit 0
        disturbed = time.perf_counter() - began
        killer.join()
        said = capsys.readouterr().err
    finally:
        stop(server)
    assert disturbed <= 1.2 * undisturbed, (disturbed, undisturbed)
    rows = list(csv.reader(open(tmp_path / "train_loss.csv")))
    assert len(rows) == STEPS + 1  # the local curve, complete
    assert said.count("stopped answering") == 1 and said.count("did not take the end of run") == 1, said
    pending = list(Path(".lmforge/tracking/pending").glob("*.jsonl"))
    assert len(pending) == 1

    server = start_server(store, port)  # back: the backfill completes the run
    try:
        done = subprocess.run(
            [sys.executable, "-m", "lmforge.tracking.backfill", "--uri", uri],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        client = MlflowClient(tracking_uri=uri)
        run = client.search_runs(
            [client.get_experiment_by_name("outage").experiment_id], "tags.lmforge_job = 'outage'"
        )[0]
        steps = sorted({m.step for m in client.get_metric_history(run.info.run_id, "train/loss")})
        assert steps == list(range(1, STEPS + 1))
        assert run.info.status == "FINISHED" and "lmforge_incomplete" not in run.data.tags
        assert run.data.params["seed"] == "1" and run.data.metrics["final_loss"] == pytest.approx(
            float(rows[-1][1])
        )
        assert not list(Path(".lmforge/tracking/pending").glob("*.jsonl"))
    finally:
        stop(server)
        mlflow.set_tracking_uri(None)


def wait_for(progress: list[int], step: int) -> None:
    deadline = time.monotonic() + 300
    while (not progress or progress[-1] < step) and time.monotonic() < deadline:
        time.sleep(0.05)
