"""Tracking off the training path: what a run sends to MLflow waits in a bounded queue that one
background thread empties, so a training step never waits on the network.

An `Outbox` per MLflow run takes metric batches (`put`, which never blocks) and sends them in order.
When the tracking server stops answering, the thread says so once (`tracking: <uri> stopped
answering at step N ...`), keeps the batches and retries the oldest with a growing pause (capped at
`MAX_PAUSE_S`); when a send goes through again it says so once more, with how long the outage lasted
and how many batches waited. A queue that reaches its capacity spills its oldest batches to the
run's journal on disk (`.lmforge/tracking/pending/<run id>.jsonl`) instead of growing, so memory
stays bounded and nothing is lost. `close(timeout)` waits at most `timeout` seconds for the queue to
empty (the end of a run: `logger.flush_timeout_s`) and spills what is left.

A journal is the run's record of what MLflow does not hold yet: metric batches, and the run's final
record when the end of the run could not be sent either (`lmforge.tracking.runs`). `backfill` sends
the journals of a store and removes each one it delivered whole; every tracked stage runs it when it
starts, and `python -m lmforge.tracking.backfill` runs it by hand. Until then the run is tagged
`lmforge_incomplete` with the steps it lacks, where the server answered at the end.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PENDING = Path(".lmforge/tracking/pending")  # one journal per run whose record MLflow lacks
CAPACITY = 2_000  # batches held in memory per run (a batch: one step's metrics)
FIRST_PAUSE_S, MAX_PAUSE_S = 0.5, 30.0  # retry pauses: doubled after each failure, capped

Batch = tuple[int, list[tuple[str, float, int]]]  # (step, [(key, value, timestamp ms)])


def say(text: str) -> None:
    print(f"tracking: {text}", file=sys.stderr, flush=True)


def brief(err: BaseException) -> str:
    """An error in one short line, for the one-line messages of an outage."""
    return " ".join(str(err).split())[:160] or type(err).__name__


def step_ranges(steps: list[int]) -> str:
    """[1, 2, 3, 7, 9, 10] -> '1-3, 7, 9-10'."""
    spans: list[list[int]] = []
    for step in sorted(set(steps)):
        if spans and step == spans[-1][1] + 1:
            spans[-1][1] = step
        else:
            spans.append([step, step])
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)


def journal_path(run_id: str, folder: Path = PENDING) -> Path:
    return folder / f"{run_id}.jsonl"


def append_journal(run_id: str, uri: str, records: list[dict[str, Any]], folder: Path = PENDING) -> Path:
    """Append records to a run's journal, each line whole (written, flushed and fsynced at once)."""
    path = journal_path(run_id, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps({"uri": uri, "run_id": run_id, **r}, default=str) + "\n" for r in records)
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return path


class Outbox:
    """The queue and its sender for one run; see the module docstring."""

    def __init__(
        self,
        uri: str,
        run_id: str,
        send: Callable[[Batch], None] | None = None,
        capacity: int = CAPACITY,
        folder: Path = PENDING,
        first_pause: float = FIRST_PAUSE_S,
    ) -> None:
        self.uri, self.run_id, self.capacity, self.folder = uri, run_id, capacity, folder
        self._client = None
        self._send = send or self._log_batch
        self._queue: collections.deque[Batch] = collections.deque()
        self._lock = threading.Condition()
        self._closing = False
        self._sending: Batch | None = None
        self._first_pause = first_pause
        self.spilled: list[int] = []  # steps written to the journal instead of sent
        self.sent = 0
        self._down_since: float | None = None
        self._thread = threading.Thread(target=self._run, name=f"lmforge-outbox-{run_id[:8]}", daemon=True)
        self._thread.start()

    def put(self, step: int, metrics: dict[str, float], timestamp_ms: int | None = None) -> None:
        """Queue one step's metrics; never blocks on the network."""
        now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        batch = (step, [(k, float(v), now) for k, v in sorted(metrics.items())])
        with self._lock:
            self._queue.append(batch)
            self._bound()
            self._lock.notify()

    def close(self, timeout: float) -> list[int]:
        """Wait at most `timeout` seconds for the queue to empty, then spill what is left to the
        journal; returns the steps MLflow does not hold (sorted)."""
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._lock:
            self._closing = True
            self._lock.notify_all()
            while (self._queue or self._sending) and time.monotonic() < deadline:
                self._lock.wait(timeout=min(0.2, max(deadline - time.monotonic(), 0.0)))
            left = ([self._sending] if self._sending else []) + list(self._queue)
            self._queue.clear()
            self._sending = None
            if left:
                self._spill(left)
            self._lock.notify_all()
        return sorted(self.spilled)

    def _bound(self) -> None:
        """Full: the oldest batches wait on disk, not in memory (caller holds the lock)."""
        while len(self._queue) > self.capacity:
            self._spill([self._queue.popleft()])

    def _spill(self, batches: list[Batch]) -> None:
        records = [{"kind": "metrics", "step": step, "metrics": metrics} for step, metrics in batches]
        append_journal(self.run_id, self.uri, records, self.folder)
        self.spilled += [step for step, _ in batches]

    def _log_batch(self, batch: Batch) -> None:
        from mlflow.entities import Metric
        from mlflow.tracking import MlflowClient

        if self._client is None:
            self._client = MlflowClient(tracking_uri=self.uri)
        step, metrics = batch
        self._client.log_batch(self.run_id, metrics=[Metric(k, v, ts, step) for k, v, ts in metrics])

    def _run(self) -> None:
        pause = self._first_pause
        while True:
            with self._lock:
                while not self._queue and not self._closing:
                    self._lock.wait()
                if not self._queue:
                    return
                batch = self._sending = self._queue.popleft()
            try:
                self._send(batch)
            except Exception as err:  # the server, the network: keep the batch, retry it later
                with self._lock:
                    if self._sending is None:  # closed meanwhile: close() spilled it
                        return
                    self._queue.appendleft(batch)
                    self._sending = None
                    self._bound()
                    waiting = len(self._queue)
                    if self._down_since is None:
                        self._down_since = time.monotonic()
                        reason = brief(err)
                        say(
                            f"{self.uri} stopped answering at step {batch[0]} ({reason}); training goes on, "
                            f"its metrics wait ({waiting} queued, the oldest spill to "
                            f"{journal_path(self.run_id, self.folder)} past {self.capacity})"
                        )
                    end = time.monotonic() + pause  # new batches do not cut the pause short
                    while time.monotonic() < end and self._queue:
                        self._lock.wait(timeout=end - time.monotonic())
                pause = min(pause * 2, MAX_PAUSE_S)
                continue
            with self._lock:
                self._sending = None
                self.sent += 1
                if self._down_since is not None:
                    say(
                        f"{self.uri} answers again after {time.monotonic() - self._down_since:.0f} s; "
                        f"{len(self._queue) + 1} queued batches go through, {len(self.spilled)} wait in "
                        f"the journal for the backfill"
                    )
                    self._down_since = None
                pause = self._first_pause
                self._lock.notify_all()


_OPEN: dict[str, Outbox] = {}  # run id -> its outbox, while the run trains in this process
_OPEN_LOCK = threading.Lock()


def outbox_for(run_id: str, uri: str) -> Outbox:
    """The run's outbox in this process, opened on first use."""
    with _OPEN_LOCK:
        if run_id not in _OPEN:
            _OPEN[run_id] = Outbox(uri, run_id)
        return _OPEN[run_id]


def close_outbox(run_id: str, timeout: float) -> list[int]:
    """Close the run's outbox (if one was opened); returns the steps MLflow does not hold."""
    with _OPEN_LOCK:
        box = _OPEN.pop(run_id, None)
    return box.close(timeout) if box is not None else []


def close_all(timeout: float) -> dict[str, list[int]]:
    """Close every open outbox within `timeout` seconds in all; run id -> steps MLflow lacks."""
    deadline = time.monotonic() + timeout
    with _OPEN_LOCK:
        ids = list(_OPEN)
    return {run_id: close_outbox(run_id, max(deadline - time.monotonic(), 0.0)) for run_id in ids}
