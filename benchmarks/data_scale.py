"""data_scale: the data stages and pretraining's first steps at about 10 MB, 100 MB and 1 GB of text.

Corpora come from data=large's prepared train split (the experiments pipeline's `large_prepare`
stage writes it): its whole documents in a seeded shuffle, written as one jsonl file (a document a
line, its sentences joined by newlines) until the size is reached. The pool holds about 100 MB, so
the 1 GB corpus passes over it ten times; each pass after the first re-cuts every document, its
sentences in a new seeded order under a new id, so that no document repeats verbatim (prepare
would drop it as a duplicate, and the corpus would shrink back to the pool).

On each corpus the project's own entry points run, one process each, as a user runs them:
`prepare` (data=local, a sentence a line), `tokenizer` (byte-level BPE, 8,192, the decoder's, on
at most `tokenizer.train_mb` of the corpus; at 100 MB also `tokenizer_whole`, the same on every
document, `tokenizer.train_mb=0`, with both tokenizers' bytes per token on the validation split),
`encode` (which turns on every core itself), `pretrain` (the default decoder's recipe for 5 steps, warmup 1, and one validation pass
over the validation split, which writes the checkpoint) and `validate` (`pipelines/evaluate.py`: a pass over
the test split, with the unigram baseline it counts over the training split). MLflow is off. Both
evaluations score `train.eval_windows=512` windows (EVAL_WINDOWS), a budget every size fills.

Per stage and size: wall seconds, MB of corpus text per second (the jsonl's sentence bytes over the
stage's seconds; encode's from the best of its ROUNDS runs, below) and peak RSS (`os.wait4`'s ru_maxrss, taken by a small process that forks the
stage: the stage's process or, if larger, its largest worker). Beside encode, in the same run and on the same sentences, bare
`Tokenizer.encode_batch` of the same tokenizer with TOKENIZERS_PARALLELISM=true (65,536 sentences a call), the fastest this
machine tokenises the text (sentences read into memory first, not timed), and that script's whole
process (interpreter, imports and reading the splits included: `bare_encode.process_seconds`), the
least a stage started as a process can take. The two run ROUNDS times each, alternating (bare,
encode, bare, ... after the stage's first run), and each keeps its best: one pair taken minutes
apart differed by as much as this host drifts (20%).

    python -m benchmarks --only data_scale                  # every size, writes reports/bench/data_scale.json
    python -m benchmarks.data_scale --sizes 10mb 100mb --write  # some sizes (the report names them)
    python -m benchmarks.data_scale --sizes 10mb                # one size, nothing written

Keys are flat, `<stage>.<measure>.<size>`, `<stage>.rss_ratio` (1 GB over 10 MB),
`tokenizer.bytes_per_token.<size>` (and `tokenizer_whole.*` at 100 MB) and
`encode.ratio_vs_bare` (at 1 GB; `encode.ratio_vs_bare_process.<size>` against the whole script), so `dvc metrics show reports/bench/data_scale.json` reads them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Row, matmul_peak, write_report
from lmforge.data.documents import read_split

GROUP = "data_scale"
POOL = Path("data/large/prepared")  # data=large's prepared corpus
SIZES = {"10mb": 10e6, "100mb": 100e6, "1gb": 1e9}
BARE_BATCH = 65_536  # sentences per `encode_batch` call of the bare reference
STAGES = ("prepare", "tokenizer", "encode", "pretrain", "validate")
WHOLE_AT = ("100mb",)  # the sizes at which the tokenizer also trains on every document, as a peer
TOKENIZER = (
    "bpe"  # the preset; its files go under the name bench_bpe, apart from the pipeline's (and its lock)
)
# The default decoder's recipe (pipelines/stages.yaml's families), 5 steps and one validation pass
PRETRAIN = [
    "model=gpt_micro",
    "objective=clm",
    "trainer=cpu_decoder",
    "optim=adamw_micro",
    "trainer.max_steps=5",
    "trainer.val_check_interval=5",
    "optim.warmup_steps=1",  # the recipe's 200 would not fit in 5 steps
]
# Windows each evaluation scores (`train.eval_windows`, default 2,048): a budget the 10 MB corpus's
# splits fill (about 900 test windows), so that every size scores the same number and validate's
# seconds measure what the corpus's size costs, not how much of the budget a small split fills.
EVAL_WINDOWS = 512
ROUNDS = 2  # runs each of the encode stage and bare encode_batch, alternating, for their ratio
# Runs one command and writes its peak RSS (KiB, its largest process: `wait4`'s ru_maxrss) to a file.
# A small process of its own forks it: a child's peak starts from its parent's size at the fork.
PEAK_RSS = (
    "import os, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.execv(sys.argv[2], sys.argv[2:])\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def build_corpus(path: Path, n_bytes: float, seed: int = 0) -> int:
    """Write documents of the pool to `path` until their sentences hold `n_bytes`; the bytes written."""
    if not (POOL / "manifest.json").is_file():
        raise SystemExit(f"{POOL} has no prepared corpus; run `python pipelines/prepare.py data=large` first")
    pool = [doc.sentences for doc in read_split(POOL, "train")]
    rng = random.Random(seed)
    written = 0
    with path.open("w", encoding="utf-8") as out:
        for passed in range(1_000):
            order = list(range(len(pool)))
            rng.shuffle(order)
            for index in order:
                sentences = list(pool[index])
                if passed:  # a re-cut of the document: its sentences in a new order
                    rng.shuffle(sentences)
                out.write(json.dumps({"id": f"{index}.{passed}", "text": "\n".join(sentences)}) + "\n")
                written += sum(len(s.encode()) for s in sentences)
                if written >= n_bytes:
                    return written
    raise AssertionError("unreachable: the pool is not empty")


def run_stage(argv: list[str], log: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one entry point run in its own process; stops on failure."""
    peak = log.with_suffix(".rss")
    start = time.perf_counter()
    with log.open("w") as out:
        code = subprocess.run(
            [sys.executable, "-c", PEAK_RSS, str(peak), *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    seconds = time.perf_counter() - start
    if code:
        tail = log.read_text().strip().splitlines()[-5:]
        raise SystemExit(f"{' '.join(argv[:3])} failed ({code}):\n" + "\n".join(tail))
    return seconds, int(peak.read_text()) / 1024  # Linux reports KiB


def bare_encode_seconds(tokenizer_file: Path, prepared: Path) -> tuple[float, float]:
    """Seconds of `encode_batch` over every sentence of the three splits (the ones the encode stage
    encodes), both cores, in a fresh process: batches of
    BARE_BATCH sentences, each batch's encodings dropped before the next (one call over 1 GB of text
    holds every `Encoding` at once and ran out of this machine's 24 GB)."""
    code = (
        "import os, sys, time\n"
        "os.environ['TOKENIZERS_PARALLELISM'] = 'true'\n"
        "from tokenizers import Tokenizer\n"
        "from lmforge.data.documents import SPLITS, read_split\n"
        "tok = Tokenizer.from_file(sys.argv[1])\n"
        "sentences = [s for split in SPLITS for doc in read_split(sys.argv[2], split) for s in doc.sentences]\n"
        "n = int(sys.argv[3])\n"
        "start = time.perf_counter()\n"
        "for i in range(0, len(sentences), n):\n"
        "    tok.encode_batch(sentences[i : i + n], add_special_tokens=False)\n"
        "print(time.perf_counter() - start)\n"
    )
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code, str(tokenizer_file), str(prepared), str(BARE_BATCH)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1]), time.perf_counter() - start


def measure(size: str, n_bytes: float, work: Path) -> dict[str, float]:
    """Every stage on a corpus of `n_bytes`: flat keys for this size."""
    corpus = work / "corpus.jsonl"
    text_mb = build_corpus(corpus, n_bytes) / 1e6
    paths = [f"paths.data={work}/data", f"paths.artifacts={work}/artifacts", f"paths.reports={work}/reports"]
    # MLflow off for every stage (as the docstring says): its client's start-up is not the data's cost
    data = ["data=local", f"data.local.path={corpus}", "data.sentence_split=lines", "logger=none", *paths]
    tok = [f"tokenizer={TOKENIZER}", f"tokenizer.name=bench_{TOKENIZER}", *paths]
    run = ["run_name=data_scale_bench", "logger=none", f"train.eval_windows={EVAL_WINDOWS}", *paths]
    python = sys.executable
    whole = [f"tokenizer.name=bench_{TOKENIZER}_whole", "tokenizer.train_mb=0"]
    commands = {
        "prepare": [python, "pipelines/prepare.py", *data],
        **(
            {"tokenizer_whole": [python, "pipelines/train_tokenizer.py", *data, *tok, *whole]}
            if size in WHOLE_AT
            else {}
        ),
        "tokenizer": [python, "pipelines/train_tokenizer.py", *data, *tok],
        "encode": [python, "pipelines/encode.py", *data, *tok],
        "pretrain": [python, "pipelines/pretrain.py", *PRETRAIN, *tok, *run],
        "validate": [python, "pipelines/evaluate.py", "model=gpt_micro", "objective=clm", *tok, *run],
    }
    result: dict[str, float] = {"corpus.mb." + size: round(text_mb, 1)}
    for stage, argv in commands.items():
        seconds, rss = run_stage(argv, work / f"{stage}.log")
        result[f"{stage}.seconds.{size}"] = round(seconds, 1)
        result[f"{stage}.mb_per_s.{size}"] = round(text_mb / seconds, 2)
        result[f"{stage}.rss_mb.{size}"] = round(rss, 1)
        print(f"{size} {stage}: {seconds:.1f} s, {text_mb / seconds:.2f} MB/s, {rss:.0f} MB", flush=True)
        if stage.startswith("tokenizer"):  # the tokenizer's quality: bytes per token on the val split
            name = f"bench_{TOKENIZER}" + ("_whole" if stage == "tokenizer_whole" else "")
            report = json.loads((work / "reports/tokenizer" / f"{name}.json").read_text())
            result[f"{stage}.bytes_per_token.{size}"] = round(report["bytes_per_token"], 4)
            result[f"{stage}.train_every.{size}"] = report["train_every"]
    # encode against bare, side by side: ROUNDS of each, alternating (the host drifts by 20% over
    # minutes, so a single pair minutes apart can differ by that much); each keeps its best round
    tokenizer_file = work / "artifacts/tokenizers" / f"bench_{TOKENIZER}" / "tokenizer.json"
    encode_runs, bare_runs = [result[f"encode.seconds.{size}"]], []
    for round_ in range(ROUNDS):
        bare_runs.append(bare_encode_seconds(tokenizer_file, work / "data/prepared"))
        if round_ + 1 < ROUNDS:
            encode_runs.append(round(run_stage(commands["encode"], work / "encode.log")[0], 1))
    encode = min(encode_runs)
    bare, process = min(b[0] for b in bare_runs), min(b[1] for b in bare_runs)
    result[f"encode.seconds.{size}"] = encode
    result[f"encode.mb_per_s.{size}"] = round(text_mb / encode, 2)
    result[f"bare_encode.seconds.{size}"] = round(bare, 1)
    result[f"bare_encode.mb_per_s.{size}"] = round(text_mb / bare, 2)
    result[f"encode.ratio_vs_bare.{size}"] = round(bare / encode, 3)
    # the same script's whole process (start, imports, reading the splits): the least a stage can pay
    result[f"bare_encode.process_seconds.{size}"] = round(process, 1)
    result[f"encode.ratio_vs_bare_process.{size}"] = round(process / encode, 3)
    print(f"{size} encode against bare, best of {ROUNDS}: {encode} s against {bare:.1f} s", flush=True)
    return result


def run(quick: bool, sizes: list[str] | None = None) -> tuple[list[Row], dict[str, float]]:
    """Rows for the benchmark table (encode against bare encode_batch, per size) and the flat report."""
    sizes = sizes or (["10mb"] if quick else list(SIZES))
    flat: dict[str, float] = {}
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix=f"data-scale-{size}-", dir=".") as tmp:
            flat.update(measure(size, SIZES[size], Path(tmp).resolve()))
    flat["sizes_run"] = len(sizes)  # how many of 10mb, 100mb, 1gb (in that order) this report holds
    if {"10mb", "1gb"} <= set(sizes):
        for stage in STAGES:
            flat[f"{stage}.rss_ratio"] = round(flat[f"{stage}.rss_mb.1gb"] / flat[f"{stage}.rss_mb.10mb"], 2)
        flat["encode.ratio_vs_bare"] = flat["encode.ratio_vs_bare.1gb"]
    rows = [
        Row(
            GROUP,
            f"encode {size}",
            flat[f"encode.mb_per_s.{size}"],
            flat[f"bare_encode.mb_per_s.{size}"],
            "MB/s",
            "Tokenizer.encode_batch, both cores",
            target=0.8,
        )
        for size in sizes
    ]
    return rows, flat


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # as `make repro` and `python -m benchmarks` run
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", choices=list(SIZES), help="sizes to run (default: all)")
    parser.add_argument("--write", action="store_true", help="write reports/bench/data_scale.json")
    args = parser.parse_args()
    rows, flat = run(False, args.sizes)
    print(json.dumps(flat, indent=2))
    if args.write:
        write_report(GROUP, rows, matmul_peak(), flat)
