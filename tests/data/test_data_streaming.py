"""Issue 52, item 1: the prepare stage streams. Its shards and manifest, outputs that do not depend on
the shard size, memory that does not grow with the corpus, a kill -9 that leaves the previous corpus
whole, and oversized input refused before it is read whole."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import entry_stage
from lmforge.data import sources
from lmforge.data.documents import MANIFEST, SPLITS, read_split, split_files
from lmforge.errors import DataError
from lmforge.io import sha256_files

ROOT = Path(__file__).resolve().parents[2]


def generate_corpus(path: Path, mb: float, seed: int = 0) -> int:
    """A jsonl corpus of about `mb` MB: documents of 20-60 random sentences over 5,000 made-up
    words. Returns how many documents it holds."""
    rng = random.Random(seed)
    words = [
        "".join(rng.choice("etaoinshrdlucmfwypvbgk") for _ in range(rng.randint(2, 9))) for _ in range(5000)
    ]
    size = n = 0
    with open(path, "w", encoding="utf-8") as f:
        while size < mb * 1e6:
            sentences = [
                " ".join(rng.choice(words) for _ in range(rng.randint(5, 20))).capitalize() + "."
                for _ in range(rng.randint(20, 60))
            ]
            line = json.dumps({"id": f"d{n}", "text": " ".join(sentences)}) + "\n"
            f.write(line)
            size, n = size + len(line), n + 1
    return n


def outputs(cfg) -> dict[str, bytes]:
    """Each split's text, shards concatenated, and the reports."""
    prepared, reports = Path(cfg.data.prepared_dir), Path(cfg.data.reports_dir)
    texts = {split: b"".join(p.read_bytes() for p in split_files(prepared, split)) for split in SPLITS}
    return {**texts, **{name: (reports / name).read_bytes() for name in ("data_card.md", "data.json")}}


def test_the_shard_size_changes_the_files_not_the_corpus(brown_cfg):
    entry_stage("prepare")(brown_cfg)
    one_shard = outputs(brown_cfg)
    assert sorted(p.name for p in Path(brown_cfg.data.prepared_dir).iterdir()) == [
        MANIFEST, "test-00000.jsonl", "train-00000.jsonl", "val-00000.jsonl"
    ]  # fmt: skip

    brown_cfg.data.shard_mb = 1e-4  # ~105 bytes: every document closes its shard
    entry_stage("prepare")(brown_cfg)
    assert outputs(brown_cfg) == one_shard
    prepared = Path(brown_cfg.data.prepared_dir)
    manifest = json.loads((prepared / MANIFEST).read_text())["splits"]
    for split in SPLITS:
        shards = manifest[split]["shards"]
        assert [s["file"] for s in shards] == [f"{split}-{i:05d}.jsonl" for i in range(len(shards))]
        assert len(shards) == manifest[split]["documents"] == len(list(read_split(prepared, split)))
        for shard in shards:
            path = prepared / shard["file"]
            assert (shard["documents"], shard["bytes"]) == (1, path.stat().st_size)
            assert shard["sha256"] == sha256_files([path])
    assert {p.name for p in prepared.iterdir()} == {
        MANIFEST,
        *(s["file"] for m in manifest.values() for s in m["shards"]),
    }


def test_a_split_is_read_through_its_manifest(brown_cfg):
    entry_stage("prepare")(brown_cfg)
    prepared = Path(brown_cfg.data.prepared_dir)
    (prepared / "train-00001.jsonl").write_text('{"id": "stray"}\n')  # not in the manifest: never read
    assert "stray" not in {doc.id for doc in read_split(prepared, "train")}
    (prepared / MANIFEST).unlink()
    with pytest.raises(DataError, match="manifest.json does not exist; run the prepare stage first"):
        next(read_split(prepared, "train"))


def test_a_folder_holding_other_files_is_refused_and_kept(brown_cfg):
    prepared = Path(brown_cfg.data.prepared_dir)
    prepared.mkdir(parents=True)
    (prepared / "notes.txt").write_text("mine")
    with pytest.raises(DataError, match=r"holds files prepare did not write \(notes.txt\)"):
        entry_stage("prepare")(brown_cfg)
    assert [p.name for p in prepared.iterdir()] == ["notes.txt"]


def test_an_oversized_file_or_line_is_refused_before_it_is_read(tmp_path, make_local_cfg):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "big.txt").write_text("Word. " * 100)  # 600 bytes: more than 100 characters of 4 bytes
    with pytest.raises(DataError, match=r"big.txt is 600 bytes, more than data.max_document_chars=100"):
        entry_stage("prepare")(make_local_cfg(corpus, max_document_chars=100))
    (corpus / "big.txt").unlink()
    (corpus / "rows.jsonl").write_text(json.dumps({"text": "Word. " * 500}) + "\n")
    with pytest.raises(DataError, match=r"rows.jsonl:1 is over 2,224 bytes"):  # 12 x 100 + 1,024
        entry_stage("prepare")(make_local_cfg(corpus, max_document_chars=100))


def _prepare(corpus: Path, out: Path, *overrides: str) -> list[str]:
    return [
        sys.executable, str(ROOT / "pipelines" / "prepare.py"), "logger=none", "data=local",
        f"data.local.path={corpus}", f"data.prepared_dir={out / 'prepared'}", f"data.reports_dir={out / 'reports'}",
        *overrides,
    ]  # fmt: skip


CAP_MB = 160  # address space allowed to a prepare run: streaming needs ~80 here, the list of documents ~250 at 50 MB


def _peak_rss_mb(command: list[str]) -> float:
    """The peak RSS of `command`, run in a fresh interpreter (so no other child counts) whose address
    space is capped at `CAP_MB` with `resource`: a run that holds the corpus dies instead of passing."""
    probe = (
        "import resource, subprocess, sys\n"
        "cap = lambda: resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]) << 20,) * 2)\n"
        "subprocess.run(sys.argv[2:], check=True, stdout=subprocess.DEVNULL, preexec_fn=cap)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(CAP_MB), *command], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1]) / 1024


@pytest.mark.slow
def test_prepare_memory_does_not_grow_with_the_corpus(tmp_path):
    """5 MB and 50 MB of generated text: before streaming, the 50 MB run held ~210 MB more than the
    5 MB one (every document in one list) and failed under the cap; now the difference is a few MB."""
    peaks = {}
    for mb in (5, 50):
        generate_corpus(tmp_path / f"c{mb}.jsonl", mb)
        peaks[mb] = _peak_rss_mb(_prepare(tmp_path / f"c{mb}.jsonl", tmp_path / f"out{mb}"))
    assert peaks[50] - peaks[5] < 25, peaks
    assert json.loads((tmp_path / "out50" / "reports" / "data.json").read_text())["train_bytes"] > 40e6


@pytest.mark.slow
def test_kill_9_mid_prepare_leaves_the_previous_corpus_whole(tmp_path):
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    generate_corpus(small, 0.05, seed=1)
    generate_corpus(big, 30, seed=2)
    subprocess.run(_prepare(small, tmp_path), check=True, capture_output=True)
    prepared = tmp_path / "prepared"
    before = {p.name: p.read_bytes() for p in prepared.iterdir()}

    child = subprocess.Popen(_prepare(big, tmp_path, "data.shard_mb=1"), stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".prepared.staging-*/train-00002.jsonl")):  # in pass 2, shards written
        assert child.poll() is None and time.monotonic() < deadline, "prepare ended before it could be killed"
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert {p.name: p.read_bytes() for p in prepared.iterdir()} == before  # no shard of the killed run
    assert (
        len(list(read_split(prepared, "train")))
        == json.loads(before[MANIFEST])["splits"]["train"]["documents"]
    )
    assert list(tmp_path.glob(".prepared.staging-*"))  # its leftovers lie beside, never inside

    subprocess.run(_prepare(big, tmp_path, "data.shard_mb=1"), check=True, capture_output=True)
    assert not list(tmp_path.glob(".prepared.*")) and len(split_files(prepared, "train")) > 20


def test_cleaning_on_every_core_gives_what_one_process_gives(tmp_path, make_local_cfg, monkeypatch):
    """Documents are cut and cleaned by a pool of worker processes, a window at a time: the corpus,
    its order and the card's counts (dropped characters too) are those of one process."""
    generate_corpus(tmp_path / "c.jsonl", 0.3)
    with open(tmp_path / "c.jsonl", "a", encoding="utf-8") as f:  # characters the cleaning drops
        f.write(json.dumps({"id": "odd", "text": "\ufeffA bom. A bell\x07 rings. Done."}) + "\n")
    monkeypatch.setattr(sources, "WINDOW_DOCUMENTS", 7)  # many windows
    cfg = make_local_cfg(tmp_path / "c.jsonl")
    entry_stage("prepare")(cfg)
    pooled = outputs(cfg)
    monkeypatch.setattr(sources.os, "sched_getaffinity", lambda pid: {0})  # one core: no pool
    entry_stage("prepare")(cfg)
    assert outputs(cfg) == pooled
    numbers = json.loads(pooled["data.json"])
    assert numbers["chars_dropped_bom"] == 1 and numbers["chars_dropped_control"] == 1
