"""Pretraining's memory does not grow with the corpus, end to end: the pretrain entry point trains a
few steps on the smoke workspace's training split and on a 25M-token (50 MB) one built from the same
tokens, in processes of their own, and the larger run's peak RSS is within a few tens of MB of the
smaller's. Copying the split into int64 (as the data module did before issue 52) would add 200 MB;
an index with one entry per token or window, tens to hundreds more."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import SMOKE_DECODER

ROOT = Path(__file__).resolve().parents[2]
N_TOKENS, SENTENCE, DOCUMENT = 25_000_000, 25, 40  # tokens; tokens per sentence; sentences per document
GROWTH_MB = 40  # allowed growth (measured: +4 MB; with the split copied into int64, +199 MB)
# runs a command and prints its peak RSS in MB (the largest of it and the processes it waited for)
PEAK = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n"
)


def big_split(encoded: Path) -> None:
    """Replace `encoded`'s training split by N_TOKENS of its own tokens, cycled, in documents of
    DOCUMENT sentences of SENTENCE tokens each."""
    meta = json.loads((encoded / "meta.json").read_text())
    tokens = np.fromfile(encoded / "train.bin", dtype=np.dtype(meta["dtype"]))
    np.resize(tokens, N_TOKENS).tofile(encoded / "train.bin")
    sentences = np.arange(0, N_TOKENS + 1, SENTENCE, dtype=np.int64)
    np.save(encoded / "train.sentences.npy", sentences)
    np.save(encoded / "train.documents.npy", np.arange(0, len(sentences), DOCUMENT, dtype=np.int64))
    meta["splits"]["train"] = {
        "documents": (len(sentences) - 1) // DOCUMENT,
        "sentences": len(sentences) - 1,
        "tokens": N_TOKENS,
    }
    (encoded / "meta.json").write_text(json.dumps(meta))


def peak_mb(workspace: Path, run_name: str) -> float:
    command = [
        sys.executable, str(ROOT / "pipelines" / "pretrain.py"), *SMOKE_DECODER, "logger=none",
        "tokenizer.vocab_size=600", "trainer.max_steps=8", "trainer.val_check_interval=8",
        f"run_name={run_name}",
    ]  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", PEAK, *command], cwd=workspace, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return float(out.stdout.split()[-1])


@pytest.mark.slow
def test_pretraining_on_a_50_mb_split_takes_the_memory_of_a_small_one(workspace, tmp_path):
    small, big = tmp_path / "small", tmp_path / "big"
    for copy in (small, big):
        for part in ("artifacts/tokenizers/bpe", "data/encoded/bpe"):
            shutil.copytree(workspace / part, copy / part)
    big_split(big / "data/encoded/bpe")
    assert (big / "data/encoded/bpe/train.bin").stat().st_size == 2 * N_TOKENS  # uint16: 50 MB
    small_mb, big_mb = peak_mb(small, "small"), peak_mb(big, "big")
    assert big_mb - small_mb < GROWTH_MB, (
        f"peak RSS {small_mb:.0f} MB on the smoke split, {big_mb:.0f} MB on 50 MB"
    )
