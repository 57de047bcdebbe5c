"""Pretraining's examples do not copy the corpus: building `PackedDataset` over a 30M-token split and
drawing 2,000 blocks from all of it grows the process's resident memory by a few MB, not by the
8 bytes per token (240 MB here) of a packed int64 stream, nor by the pages that reads through a
memory map would leave mapped (tens of MB for 2,000 random blocks, the whole file over an epoch)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

N_TOKENS, SENTENCE, DOCUMENT = 30_000_000, 20, 100  # tokens; tokens per sentence; sentences per doc

PROBE = """
import sys
from lmforge.data.datasets import PackedDataset
from lmforge.data.encoded import EncodedSplit
from lmforge.data.sampling import VisitSampler

def resident_mb():  # the process's own memory and the pages of files mapped into it
    status = open("/proc/self/status").read()
    return sum(int(status.split(key)[1].split()[0]) for key in ("RssAnon:", "RssFile:")) / 1024

before = resident_mb()
data = PackedDataset(EncodedSplit(sys.argv[1], "train"), 128, eos_id=1, bos_id=2)
visits = iter(VisitSampler(len(data), seed=0))
for _ in range(2000):
    epoch, index = next(visits)
    assert data[index]["input_ids"].shape == (128,)
print(len(data), resident_mb() - before)
"""


def write_split(directory: Path) -> None:
    (np.arange(N_TOKENS) % 30_000 + 3).astype(np.uint16).tofile(directory / "train.bin")
    sentences = np.arange(0, N_TOKENS + 1, SENTENCE, dtype=np.int64)
    np.save(directory / "train.sentences.npy", sentences)
    np.save(directory / "train.documents.npy", np.arange(0, len(sentences), DOCUMENT, dtype=np.int64))
    meta = {"dtype": "uint16", "vocab_size": 30_003, "special_ids": {}, "splits": {}}
    (directory / "meta.json").write_text(json.dumps(meta))


def test_blocks_of_a_large_split_take_no_memory_by_the_corpus(tmp_path):
    write_split(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, check=True
    ).stdout.split()
    n_blocks, grown_mb = int(out[0]), float(out[1])
    n_docs = N_TOKENS // (SENTENCE * DOCUMENT)
    assert n_blocks == (N_TOKENS + 2 * n_docs) // 128
    assert grown_mb < 24, f"building and reading the dataset grew the process by {grown_mb:.0f} MB"
