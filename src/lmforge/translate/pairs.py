"""The `translate_data` stage: parallel sentence pairs, cleaned, deduplicated and split by group.

Sources (`pairs.source`):
    sword   two Debian SWORD Bible modules (World English Bible -> Reina-Valera 1909 by default),
            fetched with `apt-get download`, pinned by sha256 and cached like the paraphrase task's
            KJV and WEB, read with the same reader (`lmforge.corpora.bible.load_verses`: notes
            and editors' headings dropped, tags stripped) and aligned by (book, chapter, verse).
            A group is a book: validation and test verses come from whole books never seen in training.
    local   a UTF-8 TSV, one pair a line: `source<TAB>target`, or `source<TAB>target<TAB>group`.

Cleaning: whitespace collapsed; exact duplicate pairs dropped (the first kept); a training pair
whose source sentence also occurs in validation or test is dropped, so no test source is seen in
training (Bible books repeat each other: 2 Kings and Isaiah, Psalms 14 and 53). A malformed local
line (not two or three columns, an empty side) is refused with one line naming it.
Outputs: {out_dir}/{train,val,test}.jsonl (`id`, `group`, `source`, `target`), the data card
{reports_dir}/data_card.md and {reports_dir}/data.json for `dvc metrics`.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmforge.corpora.bible import LICENCE, load_verses
from lmforge.corpora.fetch import cache_root
from lmforge.errors import DataError
from lmforge.io import atomic_path, write_json, write_text
from lmforge.stage import Plan, StageResult, read
from lmforge.translate.config import PairsConfig, PairsSource, pairs_config

SPLITS = ("train", "val", "test")
NO_APT_HINT = (
    "without Debian's apt-get, use your own pairs: pairs=local pairs.local.path=<file.tsv> "
    "(one 'source<TAB>target' pair a line)"
)


@dataclass(frozen=True)
class Pair:
    id: str
    group: str
    source: str
    target: str

    def to_json(self) -> str:
        return json.dumps(self.__dict__, ensure_ascii=False)


def read_sword(cfg: PairsConfig, cache: Path) -> tuple[list[Pair], dict[str, str], list[str]]:
    """Verse pairs in canonical order; provenance and notes for the card."""
    verses = []
    for module in (cfg.first, cfg.second):
        try:
            verses.append(load_verses(module, cache))
        except DataError as err:
            if "apt-get" not in str(err):
                raise
            raise DataError(f"{err}; {NO_APT_HINT}") from None
    first, second = verses
    pairs = [
        Pair(f"{book}.{chapter}.{verse}", book, first[ref], second[ref])
        for ref in first
        if ref in second
        for book, chapter, verse in [ref]
    ]
    provenance = {
        "source": f"Debian {cfg.first.pin.package}={cfg.first.pin.version} ({cfg.first.module}, "
        f"{cfg.source_lang}) and {cfg.second.pin.package}={cfg.second.pin.version} ({cfg.second.module}, "
        f"{cfg.target_lang}), read with pysword 0.2.8",
        "sha256": f"{cfg.first.pin.sha256} / {cfg.second.pin.sha256}",
        "licence": LICENCE.replace("KJV and WEB", f"{cfg.first.module} and {cfg.second.module}").replace(
            "sword-text-kjv / sword-text-web", f"{cfg.first.pin.package} / {cfg.second.pin.package}"
        ),
    }
    notes = [
        f"Verses with text: {len(first)} ({cfg.first.module}), {len(second)} ({cfg.second.module}); "
        f"aligned by (book, chapter, verse): {len(pairs)}. Verses in one module only are left out.",
        "Markup: notes and non-canonical headings dropped, tags stripped (the paraphrase task's reader).",
        "Versifications differ slightly, so a few aligned verses differ in extent.",
    ]
    return pairs, provenance, notes


def read_local(cfg: PairsConfig) -> tuple[list[Pair], dict[str, str], list[str]]:
    if not cfg.local.path:
        raise DataError("pairs.local.path: got null, expected a .tsv file of 'source<TAB>target' lines")
    path = Path(cfg.local.path)
    if not path.is_file():
        raise DataError(f"pairs.local.path: {path} does not exist; expected a .tsv file of pairs")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: byte {err.start} is not valid UTF-8; expected a UTF-8 TSV") from None
    pairs = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        columns = line.split("\t")
        if len(columns) not in (2, 3):
            raise DataError(
                f"{path}:{number}: got {len(columns)} tab-separated columns, expected 2 "
                "(source, target) or 3 (source, target, group): a misaligned pair"
            )
        source, target = " ".join(columns[0].split()), " ".join(columns[1].split())
        if not source or not target:
            side = "source" if not source else "target"
            raise DataError(f"{path}:{number}: empty {side} sentence, expected text on both sides")
        group = columns[2].strip() if len(columns) == 3 else ""
        pairs.append(Pair(f"line{number}", group, source, target))
    if not pairs:
        raise DataError(f"{path}: no pairs; expected 'source<TAB>target' lines")
    provenance = {"source": f"local file {path}", "licence": cfg.licence}
    return pairs, provenance, [f"Pairs read: {len(pairs)} from {path}."]


def deduplicate(pairs: Iterable[Pair]) -> list[Pair]:
    """The pairs without exact repeats of a (source, target) pair, the first kept, in order."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for pair in pairs:
        if (pair.source, pair.target) not in seen:
            seen.add((pair.source, pair.target))
            kept.append(pair)
    return kept


def split(pairs: list[Pair], cfg: PairsConfig) -> dict[str, list[Pair]]:
    """By group when groups are configured (every group's pairs stay in one split), else seeded by line."""
    if cfg.val_groups or cfg.test_groups:
        present = {p.group for p in pairs}
        for key in ("val_groups", "test_groups"):
            missing = [g for g in getattr(cfg, key) if g not in present]
            if missing:
                raise DataError(
                    f"pairs.{key}: {missing} not found in the data; expected groups among "
                    f"{sorted(present)[:12]}{' ...' if len(present) > 12 else ''}"
                )
        val, test = set(cfg.val_groups), set(cfg.test_groups)
        out: dict[str, list[Pair]] = {s: [] for s in SPLITS}
        for pair in pairs:
            out["test" if pair.group in test else "val" if pair.group in val else "train"].append(pair)
        return out
    order = sorted(range(len(pairs)), key=lambda i: random.Random(f"{cfg.seed}:{pairs[i].id}").random())
    n_test, n_val = round(cfg.test_fraction * len(pairs)), round(cfg.val_fraction * len(pairs))
    test, val = set(order[:n_test]), set(order[n_test : n_test + n_val])
    return {
        "test": [p for i, p in enumerate(pairs) if i in test],
        "val": [p for i, p in enumerate(pairs) if i in val],
        "train": [p for i, p in enumerate(pairs) if i not in test and i not in val],
    }


def prepare(cfg: PairsConfig) -> tuple[dict[str, list[Pair]], dict[str, Any], str]:
    """The splits, the numbers for data.json and the data card."""
    if cfg.source is PairsSource.sword:
        loaded, provenance, notes = read_sword(cfg, cache_root(cfg.cache_dir))
    else:
        loaded, provenance, notes = read_local(cfg)
    unique = deduplicate(loaded)
    splits = split(unique, cfg)
    held_out = {p.source for s in ("val", "test") for p in splits[s]}
    train = [p for p in splits["train"] if p.source not in held_out]
    leaked = len(splits["train"]) - len(train)
    if cfg.max_pairs is not None:
        train = train[: cfg.max_pairs]
    splits["train"] = train
    for name in SPLITS:
        if not splits[name]:
            raise DataError(f"split {name} of pairs {cfg.name!r} is empty; expected pairs in every split")
    numbers: dict[str, Any] = {
        "pairs_loaded": len(loaded),
        "duplicates_dropped": len(loaded) - len(unique),
        "train_dropped_held_out_source": leaked,
    }
    for name in SPLITS:
        numbers[f"{name}_pairs"] = len(splits[name])
        numbers[f"{name}_source_words"] = sum(len(p.source.split()) for p in splits[name])
        numbers[f"{name}_target_words"] = sum(len(p.target.split()) for p in splits[name])
    card = render_card(cfg, provenance, notes, numbers, splits)
    return splits, numbers, card


def render_card(
    cfg: PairsConfig,
    provenance: dict[str, str],
    notes: list[str],
    numbers: dict[str, Any],
    splits: dict[str, list[Pair]],
) -> str:
    lines = [f"# Data card: {cfg.name} ({cfg.source_lang} -> {cfg.target_lang})", "", "## Source", ""]
    lines += [f"- **{k}**: {v}" for k, v in provenance.items()]
    lines += ["", "## Preparation", ""]
    lines += [f"- {note}" for note in notes]
    lines += [
        "- Whitespace collapsed; exact duplicate pairs dropped, the first kept: "
        f"{numbers['duplicates_dropped']} of {numbers['pairs_loaded']}.",
        f"- Training pairs whose source sentence also occurs in validation or test dropped: "
        f"{numbers['train_dropped_held_out_source']}.",
    ]
    if cfg.max_pairs is not None:
        lines.append(f"- Training pairs capped at {cfg.max_pairs} (`pairs.max_pairs`).")
    by_group = cfg.val_groups or cfg.test_groups
    lines.append(
        "- Split by group (whole books): validation and test sentences come from groups never seen "
        "in training."
        if by_group
        else f"- Split by line, seeded ({cfg.seed}): {cfg.val_fraction:.0%} validation, "
        f"{cfg.test_fraction:.0%} test."
    )
    lines += [
        "",
        "## Splits",
        "",
        "| split | pairs | source words | target words | groups |",
        "|---|---|---|---|---|",
    ]
    for name in SPLITS:
        groups = Counter(p.group for p in splits[name])
        shown = (
            ", ".join(f"{g} ({n})" for g, n in groups.items()) if name != "train" else f"{len(groups)} groups"
        )
        lines.append(
            f"| {name} | {numbers[f'{name}_pairs']} | {numbers[f'{name}_source_words']} | "
            f"{numbers[f'{name}_target_words']} | {shown} |"
        )
    lines += ["", "## Examples (test)", ""]
    for pair in splits["test"][:3]:
        lines += [f"- `{pair.id}` {pair.source}", f"  -> {pair.target}"]
    return "\n".join(lines) + "\n"


def write_split(path: Path, pairs: list[Pair]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text("".join(p.to_json() + "\n" for p in pairs), encoding="utf-8")


def read_split(out_dir: str | Path, name: str) -> list[Pair]:
    path = Path(out_dir) / f"{name}.jsonl"
    if not path.is_file():
        raise DataError(f"{path} does not exist; run the translate_data stage first")
    return [Pair(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()]


@dataclass(frozen=True, kw_only=True, eq=False)
class PairsPlan(Plan):
    """The `translate_data` stage's plan."""

    pairs: PairsConfig = read(pairs_config)


def run(plan: PairsPlan) -> StageResult:
    pairs = plan.pairs
    splits, numbers, card = prepare(pairs)  # everything is checked before the first write
    out, reports = Path(pairs.out_dir), Path(pairs.reports_dir)
    for name in SPLITS:
        write_split(out / f"{name}.jsonl", splits[name])
    write_text(reports / "data_card.md", card)
    write_json(reports / "data.json", numbers)
    return StageResult(
        {k: float(v) for k, v in numbers.items()}, [str(reports / "data_card.md"), str(reports / "data.json")]
    )
