"""lmforge.tracking.outbox: a run's metrics wait in a bounded queue that a background thread sends, so
a training step never waits on the network; an outage is said once when it starts and once when it
ends; what cannot be sent goes to the run's journal, and the backfill sends it."""

from __future__ import annotations

import threading
import time

import mlflow
from mlflow.tracking import MlflowClient

from lmforge.tracking.outbox import Outbox, journal_path, step_ranges
from lmforge.tracking.record import backfill


class Server:
    """A stand-in for the tracking server: down while `down` is set, recording what it took."""

    def __init__(self) -> None:
        self.down = threading.Event()
        self.took: list[int] = []

    def send(self, batch) -> None:
        if self.down.is_set():
            raise ConnectionError("Connection refused")
        self.took.append(batch[0])


def test_steps_never_wait_and_an_outage_is_said_once_at_each_end(tmp_path, capsys):
    server = Server()
    box = Outbox("http://127.0.0.1:1", "run1", send=server.send, folder=tmp_path, first_pause=0.01)
    server.down.set()
    began = time.perf_counter()
    for step in range(1, 51):
        box.put(step, {"train/loss": 1.0 / step})
    assert time.perf_counter() - began < 0.5  # 50 steps queued while nothing answers
    time.sleep(0.2)
    server.down.clear()
    assert box.close(timeout=10) == []
    assert server.took == list(range(1, 51))  # every step, in order, none twice
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 2, said
    assert "stopped answering at step 1" in said[0] and "training goes on" in said[0]
    assert "answers again after" in said[1] and not journal_path("run1", tmp_path).exists()


def test_a_full_queue_spills_its_oldest_to_the_journal_and_close_spills_the_rest(tmp_path):
    server = Server()
    server.down.set()
    box = Outbox(
        "http://127.0.0.1:1", "run2", send=server.send, capacity=5, folder=tmp_path, first_pause=0.01
    )
    for step in range(1, 21):
        box.put(step, {"train/loss": float(step)})
    assert len(box._queue) <= 5  # memory stays bounded
    missing = box.close(timeout=0.2)  # the server never comes back within the flush
    assert missing == list(range(1, 21))
    lines = journal_path("run2", tmp_path).read_text().splitlines()
    assert len(lines) == 20 and all('"kind": "metrics"' in line for line in lines)
    assert step_ranges([1, 2, 3, 7, 9, 10]) == "1-3, 7, 9-10"


def test_the_backfill_sends_a_journal_to_its_run_and_removes_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlruns.db"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("t")
    run_id = client.create_run(experiment).info.run_id
    server = Server()
    server.down.set()
    box = Outbox(uri, run_id, send=server.send, folder=tmp_path / "pending", first_pause=0.01)
    for step in range(1, 11):
        box.put(step, {"train/loss": float(step)})
    assert box.close(timeout=0.1) == list(range(1, 11))
    client.set_tag(run_id, "lmforge_incomplete", "metrics of steps 1-10 wait")
    assert backfill(uri, tmp_path / "pending") == (1, 0)
    history = client.get_metric_history(run_id, "train/loss")
    assert sorted(m.step for m in history) == list(range(1, 11))
    assert "lmforge_incomplete" not in client.get_run(run_id).data.tags
    assert not journal_path(run_id, tmp_path / "pending").exists()
    assert backfill(uri, tmp_path / "pending") == (0, 0)  # nothing twice
    mlflow.set_tracking_uri(None)
