"""The `prepare` stage: raw source -> normalised, deduplicated documents split into train/val/test.

It streams: memory holds a window of documents in the cleaning workers (`sources.WINDOW_DOCUMENTS`,
`sources.WINDOW_CHARS`), the counts of the data card and a capped page cache, whatever the corpus
size. Two passes over a staging folder beside the output:
1. every document, cut and cleaned on every core (`sources.cleaned`), is checked against an on-disk
   index (`splits.DocumentIndex`: a repeated id is an error, repeated text a duplicate) and the
   kept ones are appended to a spill file, their sizes for the data card to a file beside it;
2. once the number of documents is known, the ranks where the split is cut are read from the index
   and the spill is routed, in source order, into each split's shards (`documents.PreparedWriter`).

Outputs, swapped into place only after the whole corpus was read and split, so a failed or killed
run leaves the previous outputs intact and never a half-written shard under the output's name:
    {prepared_dir}/{split}-NNNNN.jsonl      one document per line (see `lmforge.data.documents`)
    {prepared_dir}/manifest.json            each split's shards with documents, bytes and sha256
    {reports_dir}/data_card.md              sources, licence, versions, hashes, counts (per source
                                            too when there are several: data=mix)
    {reports_dir}/data.json                 the numbers, for `dvc metrics show`
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path

from lmforge.data import card
from lmforge.data.config import DataConfig, data_config
from lmforge.data.documents import MANIFEST, PreparedWriter, parse_line
from lmforge.data.sources import load_documents
from lmforge.data.splits import DocumentIndex
from lmforge.errors import DataError
from lmforge.io import write_json, write_text
from lmforge.stage import Plan, StageResult, read

SIZES = struct.Struct("<4q")  # a kept document's `card.Sizes`, beside its line in the spill


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class PreparePlan(Plan):
    """The `prepare` stage's plan."""

    data: DataConfig = read(data_config)


def run(plan: PreparePlan) -> StageResult:
    data: DataConfig = plan.data
    prepared, reports = Path(data.prepared_dir), Path(data.reports_dir)
    loaded = load_documents(data)
    with staging(prepared) as stage:
        index, spill = DocumentIndex(stage / "index.sqlite", data.seed), stage / "spill.jsonl"
        n_loaded = 0
        try:
            with (
                contextlib.closing(loaded.documents) as documents,  # its worker pool ends here, error or not
                open(spill, "wb") as out,
                open(spill.with_suffix(".sizes"), "wb") as measured,
            ):
                for doc, counted in documents:
                    n_loaded += 1
                    if index.add(doc):
                        out.write((doc.to_json() + "\n").encode("utf-8"))
                        measured.write(SIZES.pack(*counted))
            if not n_loaded:
                raise DataError(f"data.source={data.source.value} yielded no documents; expected at least 3")
            cut = index.boundaries(data.val_fraction, data.test_fraction, data.max_documents)
            n_duplicates = index.duplicates
        finally:
            index.close()
        tally = card.Tally()
        with PreparedWriter(stage, int(data.shard_mb * 2**20)) as writer, open(spill, "rb") as lines:
            with open(spill.with_suffix(".sizes"), "rb") as measured:
                for lineno, line in enumerate(lines, start=1):
                    doc = parse_line(line, spill, lineno)
                    counted = card.Sizes(*SIZES.unpack(measured.read(SIZES.size)))
                    if (split := cut.split_of(doc.id, data.seed)) is not None:
                        writer.write_line(split, line)
                        tally.add(split, doc, counted)
        spill.unlink()
        spill.with_suffix(".sizes").unlink()
        shards = [str(prepared / path.name) for path in writer.files()]

    numbers = card.metrics(tally, n_loaded, n_duplicates, loaded.dropped)
    if repaired := {kind: n for kind, n in sorted(loaded.dropped.items()) if n}:  # said here, and in the card
        counts = ", ".join(f"{n:,} {card.DROPPED_NAMES[kind]}" for kind, n in repaired.items())
        print(f"prepare: dropped {counts} from the text (see {data.reports_dir}/data_card.md)")
    settings = {
        "val_fraction": data.val_fraction,
        "test_fraction": data.test_fraction,
        "seed": data.seed,
        "max_documents": data.max_documents,
        "max_document_chars": data.max_document_chars,
    }
    text = card.render(data.name, loaded.provenance, numbers, tally, settings, loaded.notes)
    write_text(reports / "data_card.md", text)
    write_json(reports / "data.json", numbers)
    artifacts = [*shards, str(prepared / MANIFEST), str(reports / "data_card.md"), str(reports / "data.json")]
    return StageResult(numbers, artifacts)


OURS = re.compile(r"(train|val|test)(-\d{5})?\.jsonl|manifest\.json")  # what prepare writes (or wrote)


def _alive(pid: str) -> bool:
    """Whether the process that named a staging folder still runs (then its folder is not stale)."""
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return int(pid) != os.getpid()


@contextlib.contextmanager
def staging(target: Path) -> Iterator[Path]:
    """A fresh folder beside `target` to build it in; on success it replaces `target` (the old one is
    renamed away first, then removed), on failure it is removed and `target` is untouched. Folders
    left by a killed run are removed first."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_dir() and (
        foreign := sorted(p.name for p in target.iterdir() if not OURS.fullmatch(p.name))
    ):
        raise DataError(
            f"data.prepared_dir={target} holds files prepare did not write ({', '.join(foreign[:3])}); "
            "expected an empty folder or a prepared corpus, which prepare replaces whole"
        )
    for stale in target.parent.glob(f".{target.name}.*-*"):
        if stale.is_dir() and not _alive(stale.name.rsplit("-", 1)[-1]):
            shutil.rmtree(stale, ignore_errors=True)
    stage = target.parent / f".{target.name}.staging-{os.getpid()}"
    stage.mkdir()
    try:
        yield stage
        old = target.parent / f".{target.name}.old-{os.getpid()}"
        if target.exists():
            target.rename(old)
        stage.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
