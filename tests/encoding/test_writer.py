"""The encode stage's writer: files byte-identical to `np.save` of the offsets whatever the batching,
nothing left behind on failure, and memory that does not grow with the number of sentences."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from lmforge.data.encoded import EncodedSplit
from lmforge.encoding.writer import SplitWriter
from lmforge.errors import DataError

ROOT = Path(__file__).resolve().parents[2]


def _documents(seed: int = 0, n: int = 40) -> list[list[list[int]]]:
    """Documents of 0-6 sentences of 0-9 ids each (empty documents and sentences included)."""
    rng = np.random.default_rng(seed)
    return [
        [rng.integers(0, 65535, size=rng.integers(0, 10)).tolist() for _ in range(rng.integers(0, 7))]
        for _ in range(n)
    ]


def _reference(folder: Path, docs: list[list[list[int]]]) -> None:
    """The layout computed directly: ids concatenated, offsets as `np.save` writes them."""
    folder.mkdir()
    lengths = [len(s) for doc in docs for s in doc]
    ids = [i for doc in docs for s in doc for i in s]
    np.asarray(ids, dtype=np.uint16).tofile(folder / "train.bin")
    np.save(folder / "train.sentences.npy", np.cumsum([0, *lengths]).astype(np.int64))
    np.save(folder / "train.documents.npy", np.cumsum([0, *(len(d) for d in docs)]).astype(np.int64))


def _write_in_batches(folder: Path, docs: list[list[list[int]]], batch: int) -> dict[str, int]:
    with SplitWriter(folder, "train", np.uint16) as writer:
        for start in range(0, len(docs), batch):
            part = docs[start : start + batch]
            sentences = [s for doc in part for s in doc]
            writer.add_batch(
                np.array([len(s) for s in sentences], dtype=np.int64),
                np.array([i for s in sentences for i in s], dtype=np.int64),
                [len(doc) for doc in part],
            )
    return writer.counts()


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("batch", [1, 3, 7, 40])
def test_the_files_are_np_save_s_whatever_the_batch(tmp_path, batch):
    docs = _documents()
    _reference(tmp_path / "ref", docs)
    counts = _write_in_batches(tmp_path / "out", docs, batch)
    assert _files(tmp_path / "out") == _files(tmp_path / "ref")
    assert counts == {
        "documents": len(docs),
        "sentences": sum(map(len, docs)),
        "tokens": sum(len(s) for d in docs for s in d),
    }


def test_add_document_writes_what_add_batch_writes(tmp_path):
    docs = _documents(seed=1)
    _write_in_batches(tmp_path / "batch", docs, 5)
    with SplitWriter(tmp_path / "doc", "train", np.uint16) as writer:
        for doc in docs:
            writer.add_document(iter(s) for s in doc)
    assert _files(tmp_path / "doc") == _files(tmp_path / "batch")


def test_an_empty_split_reads_back_as_empty(tmp_path):
    _write_in_batches(tmp_path, [], 1)
    (tmp_path / "meta.json").write_text('{"dtype": "uint16", "vocab_size": 10, "special_ids": {}}')
    split = EncodedSplit(tmp_path, "train")
    assert (split.n_tokens, split.n_documents) == (0, 0)


def test_a_failure_keeps_the_previous_split_and_leaves_no_file(tmp_path):
    _write_in_batches(tmp_path, _documents(), 8)
    before = _files(tmp_path)
    with pytest.raises(DataError, match="token id out of range for uint16 in split train"):
        with SplitWriter(tmp_path, "train", np.uint16) as writer:
            writer.add_batch(np.array([2]), np.array([1, 2]), [1])
            writer.add_batch(np.array([1]), np.array([70000]), [1])
    with pytest.raises(RuntimeError, match="stop"):
        with SplitWriter(tmp_path, "train", np.uint16) as writer:
            writer.add_batch(np.array([2]), np.array([1, 2]), [1])
            raise RuntimeError("stop")
    assert _files(tmp_path) == before  # no temporary left beside them either


def test_a_batch_whose_parts_disagree_is_refused(tmp_path):
    with pytest.raises(ValueError, match="a batch of 3 ids, 1 sentence lengths summing to 2"):
        with SplitWriter(tmp_path, "train", np.uint16) as writer:
            writer.add_batch(np.array([2]), np.array([1, 2, 3]), [1])
    assert list(tmp_path.iterdir()) == []


WRITE = """
import sys, time
import numpy as np
from lmforge.encoding.writer import SplitWriter
n, pause = int(sys.argv[2]), float(sys.argv[3])
with SplitWriter(sys.argv[1], "train", np.uint16) as writer:
    for _ in range(n // 10_000):
        writer.add_batch(np.ones(10_000, np.int64), np.ones(10_000, np.int64), np.ones(10_000, np.int64))
        time.sleep(pause)
import resource
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _writer_process(folder: Path, n_sentences: int, pause: float = 0.0) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen(
        [sys.executable, "-c", WRITE, str(folder), str(n_sentences), str(pause)],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def test_memory_does_not_grow_with_the_sentences(tmp_path):
    """200k and 4M one-token sentences: a Python int per sentence (the writer before this one) would
    hold ~150 MB more for the larger split; this one holds one batch."""
    peaks = []
    for n in (200_000, 4_000_000):
        proc = _writer_process(tmp_path / str(n), n)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        peaks.append(int(out.split()[-1]) / 1024)
    assert peaks[1] - peaks[0] < 20, peaks
    assert (tmp_path / "4000000" / "train.bin").stat().st_size == 8_000_000


def test_kill_9_mid_write_leaves_the_previous_split_whole(tmp_path):
    _write_in_batches(tmp_path, _documents(), 8)
    before = _files(tmp_path)
    proc = _writer_process(tmp_path, 10_000_000, pause=0.05)
    deadline = time.monotonic() + 60
    while not any(p.name.startswith(".train.bin.") for p in tmp_path.iterdir()):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    time.sleep(0.3)  # a few batches in
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = _files(tmp_path)
    assert {name: left[name] for name in before} == before
    assert all(name.startswith(".") and name.endswith(".tmp") for name in set(left) - set(before))
