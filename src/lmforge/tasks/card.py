"""The task card: where the data came from, what was derived or dropped, and counts per split and label.

`card.json` holds the same facts as `card.md` in machine-readable form (for `dvc metrics` and the
fine-tuning stage); neither holds a timestamp, so a rerun writes them byte-identically.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from lmforge.tasks.config import Kind, TaskConfig

SPLITS = ("train", "val", "test")


def label_counts(kind: Kind, records: Sequence[dict]) -> dict[str, int]:
    """Examples per label (classification), tokens per tag (tagging); empty for qa."""
    if kind is Kind.tagging:
        counts = Counter(tag for r in records for tag in r["tags"])
    elif kind is Kind.qa:
        return {}
    else:
        counts = Counter(r["label"] for r in records)
    return dict(sorted(counts.items()))


def summary(
    cfg: TaskConfig,
    splits: Mapping[str, Sequence[dict]],
    provenance: Mapping[str, str],
    notes: Sequence[str],
    file_sha256: Mapping[str, str],
) -> dict[str, Any]:
    counts = {split: len(splits[split]) for split in SPLITS}
    return {
        "task": cfg.name,
        "kind": cfg.kind.value,
        "source": cfg.source,
        "provenance": dict(provenance),
        "labels": list(cfg.labels or []),
        "metrics": [m.value for m in cfg.metrics],
        "split": {"val_fraction": cfg.val_fraction, "test_fraction": cfg.test_fraction, "seed": cfg.seed},
        "counts": counts,
        "label_counts": {split: label_counts(cfg.kind, splits[split]) for split in SPLITS},
        "notes": list(notes),
        "files_sha256": dict(file_sha256),
    }


def render(facts: Mapping[str, Any]) -> str:
    """card.md from the facts of card.json."""
    unit = "tokens" if facts["kind"] == Kind.tagging.value else "examples"
    provenance = dict(facts["provenance"])
    origin = provenance.pop("source", "")
    lines = [f"# Task card: {facts['task']}", "", f"- **kind**: {facts['kind']}"]
    lines += [f"- **source**: {facts['source']}: {origin}"]
    lines += [f"- **{key}**: {value}" for key, value in provenance.items()]
    lines += [f"- **metrics**: {', '.join(facts['metrics'])}", ""]
    split = facts["split"]
    lines += ["## Preparation", ""]
    lines += [f"- {note}" for note in facts["notes"]]
    lines += [
        f"- Split (unless the source fixes it): groups ranked by sha256(seed:group), seed {split['seed']}; "
        f"test {split['test_fraction']}, val {split['val_fraction']}, rest train.",
        "",
        "## Counts",
        "",
        "| split | examples | sha256 of file |",
        "|---|---:|---|",
    ]
    lines += [f"| {s} | {facts['counts'][s]:,} | `{facts['files_sha256'][s]}` |" for s in SPLITS]
    if facts["labels"]:
        lines += ["", f"## {unit.capitalize()} per label", "", "| label | " + " | ".join(SPLITS) + " |"]
        lines.append("|---|" + "---:|" * len(SPLITS))
        for label in facts["labels"]:
            cells = [f"{facts['label_counts'][s].get(label, 0):,}" for s in SPLITS]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
