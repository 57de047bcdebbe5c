"""The `prepare` stage: raw source -> normalised, deduplicated documents split into train/val/test.

Outputs (all written atomically, and only after the whole corpus was read and split, so a failed
run leaves the previous outputs intact):
    {prepared_dir}/{train,val,test}.jsonl   one document per line (see `lmforge.data.documents`)
    {reports_dir}/data_card.md              sources, licence, versions, hashes, counts (per source
                                            too when there are several: data=mix)
    {reports_dir}/data.json                 the numbers, for `dvc metrics show`
"""

from __future__ import annotations

from pathlib import Path

from lmforge.data import card
from lmforge.data.documents import SPLITS, write_documents
from lmforge.data.sources import load_documents
from lmforge.data.splits import deduplicate, split_documents
from lmforge.errors import DataError
from lmforge.io import write_json, write_text
from lmforge.stage import Plan, StageResult


def run(plan: Plan) -> StageResult:
    data = plan.data
    documents, provenance, dropped, notes = load_documents(data)
    if not documents:
        raise DataError(f"data.source={data.source.value} yielded no documents; expected at least 3")
    unique, n_duplicates = deduplicate(documents)
    splits = split_documents(unique, data.val_fraction, data.test_fraction, data.seed, data.max_documents)
    numbers = card.metrics(splits, len(documents), n_duplicates, dropped)
    if repaired := {kind: n for kind, n in sorted(dropped.items()) if n}:  # said here, and in the data card
        counts = ", ".join(f"{n:,} {card.DROPPED_NAMES[kind]}" for kind, n in repaired.items())
        print(f"prepare: dropped {counts} from the text (see {data.reports_dir}/data_card.md)")

    prepared, reports = Path(data.prepared_dir), Path(data.reports_dir)
    artifacts = []
    for split in SPLITS:
        write_documents(prepared / f"{split}.jsonl", splits[split])
        artifacts.append(str(prepared / f"{split}.jsonl"))
    settings = {
        "val_fraction": data.val_fraction,
        "test_fraction": data.test_fraction,
        "seed": data.seed,
        "max_documents": data.max_documents,
        "max_document_chars": data.max_document_chars,
    }
    write_text(reports / "data_card.md", card.render(data.name, provenance, numbers, splits, settings, notes))
    write_json(reports / "data.json", numbers)
    artifacts += [str(reports / "data_card.md"), str(reports / "data.json")]
    return StageResult(numbers, artifacts)
