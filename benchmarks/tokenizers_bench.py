"""Our tokenizer code against calling HF `tokenizers` directly, on the real prepared corpus.

Training: `lmforge.tokenizer.builders.train_tokenizer` against the same tokenizer built by hand
(same normalizer, pre-tokenizer, trainer settings and special tokens, `train_from_iterator` on the
same batches). For BPE the builder is a thin layer over `BpeTrainer`, so the vocabularies must be
equal and the ratio is the wrapper's overhead. For WordPiece the builder deliberately learns the
vocabulary with BPE merges instead of `WordPieceTrainer` (whose ties break differently on every
run), so the vocabularies differ; the row reports their overlap and what reproducibility costs.

Encoding: the encode stage's per-split work (`lmforge.encoding.encode.encode_split`: read the prepared
JSON lines, `encode_batch_fast` about 1000 sentences of whole documents at a time, write the token
arrays) against one `Tokenizer.encode_batch` call on the same sentences held in memory. The written
arrays must equal the peer's ids.

Throughput is MB of UTF-8 sentence text per second. TOKENIZERS_PARALLELISM is false on both sides,
as `make repro` runs the pipeline, so both use one thread; except in the "encode every core" rows,
where it is true on both sides, as the encode stage runs (`lmforge.encoding.encode.every_core`): the
stage's batches, encoded one ahead of the writing, against one `encode_batch` call over every
sentence, the fastest this machine encodes the text.
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # before `tokenizers` is imported, as the pipeline does

import argparse
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from benchmarks.common import Row, interleave, matmul_peak, median, write_report
from lmforge.data.documents import Document, read_split, write_prepared
from lmforge.data.encoded import token_dtype
from lmforge.encoding.encode import encode_split, every_core
from lmforge.encoding.writer import SplitWriter
from lmforge.tokenizer.builders import WORDPIECE_ALPHABET, train_tokenizer
from lmforge.tokenizer.config import Kind, TokenizerConfig
from lmforge.tokenizer.specials import BPE_SPECIALS, WORDPIECE_SPECIALS, load_tokenizer, special_tokens
from lmforge.tokenizer.train import batched

GROUP = "tokenizers"
PREPARED = Path("data/prepared")
VOCAB = 8192


def take_documents(prepared: Path, n_bytes: int) -> list[Document]:
    """Whole documents from the start of the prepared train split, until their sentences hold `n_bytes`
    of text."""
    docs, size = [], 0
    for doc in read_split(prepared, "train"):
        docs.append(doc)
        size += sum(len(s.encode()) for s in doc.sentences)
        if size >= n_bytes:
            break
    return docs


def hf_bpe(cfg: TokenizerConfig, batches: Iterator[list[str]]) -> Tokenizer:
    """GPT-2 byte-level BPE the way the `tokenizers` docs build it."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab_size,
        min_frequency=cfg.min_frequency,
        special_tokens=special_tokens(BPE_SPECIALS, cfg.n_sentinels),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(batches, trainer)
    return tok


def hf_wordpiece(cfg: TokenizerConfig, batches: Iterator[list[str]]) -> Tokenizer:
    """BERT WordPiece the way the `tokenizers` docs build it, with `WordPieceTrainer`."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix="##"))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, lowercase=cfg.lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = trainers.WordPieceTrainer(
        vocab_size=cfg.vocab_size,
        min_frequency=cfg.min_frequency,
        special_tokens=special_tokens(WORDPIECE_SPECIALS, cfg.n_sentinels),
        limit_alphabet=WORDPIECE_ALPHABET,
        continuing_subword_prefix="##",
        show_progress=False,
    )
    tok.train_from_iterator(batches, trainer)
    return tok


PEERS: dict[Kind, tuple[str, Callable[[TokenizerConfig, Iterator[list[str]]], Tokenizer]]] = {
    Kind.bpe: ("HF BpeTrainer", hf_bpe),
    Kind.wordpiece: ("HF WordPieceTrainer", hf_wordpiece),
}


def measure(kind: Kind, docs: list[Document], rounds: int, folder: Path) -> list[Row]:
    cfg = TokenizerConfig(name=kind.value, kind=kind, vocab_size=VOCAB)
    sentences = [s for doc in docs for s in doc.sentences]
    mb = sum(len(s.encode()) for s in sentences) / 1e6
    peer_name, peer_build = PEERS[kind]
    trained: dict[str, Tokenizer] = {}

    def train_ours() -> None:
        trained["ours"] = train_tokenizer(cfg, batched(iter(sentences), cfg.batch_size))

    def train_peer() -> None:
        trained["peer"] = peer_build(cfg, batched(iter(sentences), cfg.batch_size))

    train = interleave({"ours": train_ours, "peer": train_peer}, rounds=rounds, warmup=1)
    vocab_ours, vocab_peer = trained["ours"].get_vocab(), trained["peer"].get_vocab()
    shared = len(vocab_ours.keys() & vocab_peer.keys())

    # Encoding: both sides use the tokenizer our builder just trained, saved as the stage saves it.
    tok_file = folder / kind.value / "tokenizer.json"
    tok_file.parent.mkdir(parents=True, exist_ok=True)
    trained["ours"].save(str(tok_file))
    prepared = folder / kind.value / "prepared"
    write_prepared(prepared, {"train": docs})
    ours_tok, peer_tok = load_tokenizer(tok_file), Tokenizer.from_file(str(tok_file))
    dtype = token_dtype(ours_tok.get_vocab_size())
    ids: dict[str, list[list[int]]] = {}

    def encode_ours() -> None:
        with SplitWriter(folder / kind.value, "train", dtype) as writer:
            encode_split(ours_tok, read_split(prepared, "train"), writer, cfg.batch_size)

    def encode_peer() -> None:
        ids["peer"] = [e.ids for e in peer_tok.encode_batch(sentences, add_special_tokens=False)]

    encode = interleave({"ours": encode_ours, "peer": encode_peer}, rounds=rounds + 2, warmup=1)
    written = np.fromfile(folder / kind.value / "train.bin", dtype=dtype)
    expected = np.fromiter((i for row in ids["peer"] for i in row), dtype=np.int64)
    with every_core():
        parallel = interleave({"ours": encode_ours, "peer": encode_peer}, rounds=rounds + 2, warmup=1)
    written_parallel = np.fromfile(folder / kind.value / "train.bin", dtype=dtype)
    common = {"mb": round(mb, 3), "TOKENIZERS_PARALLELISM": os.environ["TOKENIZERS_PARALLELISM"]}

    def row(name: str, samples: dict[str, list[float]], peer: str, **extra: object) -> Row:
        """A row of MB/s from both sides' seconds, with the common facts and `extra`."""
        seconds = {"s_ours": median(samples["ours"]), "s_peer": median(samples["peer"])}
        return Row(
            group=GROUP,
            name=f"{kind.value} {name}",
            ours=mb / seconds["s_ours"],
            peer=mb / seconds["s_peer"],
            unit="MB/s",
            peer_name=peer,
            extra={**common, **extra, **seconds},
        )

    return [
        row(
            "train",
            train,
            peer_name,
            same_vocab=vocab_ours == vocab_peer,
            vocab_overlap=shared / len(vocab_ours),  # share of our tokens the peer also has
        ),
        row(
            "encode",
            encode,
            "Tokenizer.encode_batch",
            ours_is="encode_split: read JSON lines + encode_batch_fast per ~1000 sentences + write arrays",
            ids_equal=bool(np.array_equal(written.astype(np.int64), expected)),
            tokens=int(expected.size),
        ),
        row(
            "encode every core",
            parallel,
            "Tokenizer.encode_batch, one call",
            TOKENIZERS_PARALLELISM="true",
            cores=os.cpu_count(),
            ours_is="the encode stage: batches encoded one ahead of the writing, thread pool on",
            ids_equal=bool(np.array_equal(written_parallel.astype(np.int64), expected)),
            tokens=int(expected.size),
            speedup_over_one_thread=median(encode["ours"]) / median(parallel["ours"]),
        ),
    ]


def run(quick: bool = False) -> list[Row]:
    if not (PREPARED / "manifest.json").is_file():
        print(f"skipped: {PREPARED} does not exist (run the prepare stage first)")
        return []
    docs = take_documents(PREPARED, int((0.5 if quick else 2.0) * 1e6))
    rounds = 2 if quick else 3
    with tempfile.TemporaryDirectory() as folder:
        return [
            row for kind in (Kind.bpe, Kind.wordpiece) for row in measure(kind, docs, rounds, Path(folder))
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="0.5 MB of text, fewer rounds")
    args = parser.parse_args()
    rows = run(args.quick)
    for row in rows:
        e = row.extra
        check = (
            f"ids equal {e['ids_equal']}"
            if "ids_equal" in e
            else f"same vocab {e['same_vocab']}, overlap {e['vocab_overlap']:.3f}"
        )
        print(
            f"{row.name:16s} ours {row.ours:5.2f} peer {row.peer:5.2f} {row.unit} ratio {row.ratio:.2f} "
            f"({e['mb']} MB, {check})"
        )
    if rows:
        print(f"wrote {write_report(GROUP, rows, matmul_peak())}")


if __name__ == "__main__":
    main()
