"""Extractive QA DERIVED from WordNet 3.0 glosses (Miller 1995, "WordNet: a lexical database for English").

Source: the Debian package `wordnet-base` (`apt-get download`, pinned by sha256, unpacked with
`dpkg -x` into the cache), files `usr/share/wordnet/data.{noun,verb,adj,adv}` in the wndb(5WN)
format, one synset a line (lines starting with two spaces are the licence header):

    offset lex_filenum ss_type w_cnt [word lex_id]... p_cnt [symbol offset pos source/target]... | gloss

(`w_cnt` and `lex_id` hex, `p_cnt` decimal; verbs put their frames between the pointers and `|`.)

Each question asks for a synset related to the headword (the synset's first lemma) by one relation:

    hypernym           @   "What is a dog a kind of?"    /  verbs: "To scowl is a way to do what?"
    instance hypernym  @i  "What is Yorktown an instance of?"
    part holonym       #p  "What is a bulkhead part of?"

and is asked only when the definition (the gloss before its quoted examples) holds a lemma of a
related synset as a whole word (case-insensitive, underscores as spaces, hyphenated compounds are
not split; a match inside a longer match does not count). That span is the answer; the context is
the whole gloss, whitespace collapsed. A question is dropped when related lemmas match more than
one span of the whole gloss (ambiguous) or when the answer is the headword itself. Questions are
grouped by synset, and at most `max_examples` are kept, sampled by sha256(f"{seed}:{id}").
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from lmforge.corpora.fetch import apt_deb, unpack_deb
from lmforge.corpora.pin import Pin
from lmforge.errors import ConfigError, DataError
from lmforge.tasks.config import Kind
from lmforge.tasks.records import Example, example
from lmforge.tasks.sources import Context, Loaded
from lmforge.tasks.splits import rank

LICENCE = (
    "WordNet 3.0 licence (Princeton University; BSD-like: use, copy, modify and distribute with the "
    "copyright notice kept), as shipped in Debian wordnet-base"
)
FILES = {"n": "data.noun", "v": "data.verb", "a": "data.adj", "r": "data.adv"}  # pos -> data file


@dataclass(frozen=True)
class Relation:
    name: str  # part of each question's id
    symbol: str  # WordNet pointer symbol
    questions: dict[str, str]  # synset pos -> question; {a} is "a " / "an " / "" before {head}


RELATIONS = (
    Relation("hypernym", "@", {"n": "What is {a}{head} a kind of?", "v": "To {head} is a way to do what?"}),
    Relation("instance", "@i", {"n": "What is {a}{head} an instance of?"}),
    Relation("part", "#p", {"n": "What is {a}{head} part of?"}),
)


@dataclass
class WordNetQAParams:
    pin: Pin = field(default_factory=Pin)  # Debian wordnet-base .deb
    folder: str = "usr/share/wordnet"  # inside the unpacked .deb: data.{noun,verb,adj,adv}
    max_examples: int | None = 6000  # keep at most this many questions (seeded sample); null: all

    def __post_init__(self) -> None:
        if self.max_examples is not None and self.max_examples < 1:
            raise ConfigError(f"task.params.max_examples={self.max_examples}; expected >= 1 or null")


@dataclass(frozen=True)
class Synset:
    pos: str  # its data file: n, v, a (head and satellite adjectives), r
    offset: str  # 8 digits: the byte offset of its line in that file, its key within the file
    words: tuple[str, ...]  # lemmas, underscores as spaces, adjective markers such as "(p)" removed
    pointers: tuple[tuple[str, str], ...]  # (symbol, key of the target synset), semantic pointers only
    gloss: str  # definition and quoted examples, whitespace collapsed

    @property
    def key(self) -> str:
        return f"{self.pos}{self.offset}"


def parse_data(text: str, pos: str, where: str) -> list[Synset]:
    """The synsets of one data file; a malformed line is a one-line DataError naming it."""
    synsets = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith(" "):
            continue
        head, bar, gloss = line.partition(" | ")
        cells = head.split()
        try:
            n_words = int(cells[3], 16)
            words = tuple(_lemma(cells[4 + 2 * i]) for i in range(n_words))
            at = 4 + 2 * n_words
            n_pointers = int(cells[at])
            raw = [cells[at + 1 + 4 * i : at + 5 + 4 * i] for i in range(n_pointers)]
            if not bar or not words or any(len(p) != 4 for p in raw):
                raise ValueError
        except (IndexError, ValueError):
            raise DataError(
                f"{where}:{lineno} is {line[:60]!r}; expected a wndb synset line (offset ... | gloss)"
            ) from None
        pointers = tuple((sym, _file_pos(p) + off) for sym, off, p, st in raw if st == "0000")
        synsets.append(Synset(pos, cells[0], words, pointers, " ".join(gloss.split())))
    return synsets


def _lemma(word: str) -> str:
    return re.sub(r"\([a-z]+\)$", "", word).replace("_", " ")


def _file_pos(pointer_pos: str) -> str:
    return "a" if pointer_pos == "s" else pointer_pos


def data_folder(params: WordNetQAParams, ctx: Context) -> Path:
    """The folder holding data.{noun,verb,adj,adv}, fetched and unpacked once."""
    return unpack_deb(apt_deb(params.pin, ctx.cache)) / params.folder


def load_synsets(folder: Path) -> dict[str, Synset]:
    synsets: dict[str, Synset] = {}
    for pos, name in FILES.items():
        path = folder / name
        if not path.is_file():
            raise DataError(f"{path} is missing; expected WordNet's data.{{noun,verb,adj,adv}} there")
        synsets.update((s.key, s) for s in parse_data(path.read_text(encoding="utf-8"), pos, str(path)))
    return synsets


def derive(synsets: dict[str, Synset], kind: Kind) -> tuple[list[Example], Counter]:
    """Every question the relations give, in file order; counts of (relation, outcome) for the card."""
    examples, counts = [], Counter()
    for synset in synsets.values():
        for relation in RELATIONS:
            template = relation.questions.get(synset.pos)
            targets = [
                _target(synsets, synset, key) for sym, key in synset.pointers if sym == relation.symbol
            ]
            if template is None or not targets:
                continue
            spans = _spans(synset.gloss, {word for target in targets for word in target.words})
            definition_end = _definition_end(synset.gloss)
            in_definition = [(start, end) for start, end in spans if end <= definition_end]
            if not in_definition:
                continue
            counts[relation.name, "candidates"] += 1
            start, end = in_definition[0]
            answer, head = synset.gloss[start:end], synset.words[0]
            if len(spans) > 1:
                counts[relation.name, "ambiguous"] += 1
            elif answer.lower() == head.lower():
                counts[relation.name, "headword"] += 1
            else:
                record = example(
                    kind,
                    group=synset.key,
                    id=f"{synset.key}-{relation.name}",
                    question=template.format(a=_article(head), head=head),
                    context=synset.gloss,
                    answer_text=answer,
                    answer_start=start,
                )
                examples.append(record)
    return examples, counts


def _target(synsets: dict[str, Synset], synset: Synset, key: str) -> Synset:
    if key not in synsets:
        raise DataError(f"synset {synset.key} ({synset.words[0]}) points to {key}, which no data file holds")
    return synsets[key]


def _definition_end(gloss: str) -> int:
    """Where the definition ends: at the first quoted example (`; "...`), else at the gloss's end."""
    quote = re.search(r'(^|;\s*)"', gloss)
    return quote.start() if quote else len(gloss)


def _spans(text: str, lemmas: set[str]) -> list[tuple[int, int]]:
    """Whole-word, case-insensitive matches of any lemma in `text`, less those inside a longer one."""
    found = {span for lemma in lemmas for span in _matches(text, lemma)}
    return sorted(s for s in found if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in found))


def _matches(text: str, lemma: str) -> list[tuple[int, int]]:
    """Spans of `lemma` in `text` not touching a word character or '-' on either side, any case. ASCII
    text (all of WordNet's) is searched with str.find: a regex per lemma, ~100k distinct patterns,
    would overflow re's cache and dominate the build."""
    if not (text.isascii() and lemma.isascii()):
        pattern = rf"(?<![\w-]){re.escape(lemma)}(?![\w-])"
        return [(m.start(), m.end()) for m in re.finditer(pattern, text, re.IGNORECASE)]
    folded, needle, spans = text.lower(), lemma.lower(), []
    at = folded.find(needle)
    while at != -1 and needle:
        end = at + len(needle)
        if not (at and _joins(folded[at - 1])) and not (end < len(folded) and _joins(folded[end])):
            spans.append((at, end))
        at = folded.find(needle, at + 1)
    return spans


def _joins(char: str) -> bool:
    return char.isalnum() or char in "_-"


def _article(head: str) -> str:
    """The article before a lowercase headword, by its first letter; none before names."""
    if not head[0].islower():
        return ""
    return "an " if head[0] in "aeiou" else "a "


def sample(examples: list[Example], max_examples: int | None, seed: int) -> list[Example]:
    """At most max_examples, the lowest sha256(f"{seed}:{id}"), in their original order."""
    if max_examples is None or len(examples) <= max_examples:
        return examples
    ranked = sorted(examples, key=lambda ex: rank(ex.record["id"], seed))
    chosen = {ex.record["id"] for ex in ranked[:max_examples]}
    return [ex for ex in examples if ex.record["id"] in chosen]


def read(params: WordNetQAParams, ctx: Context) -> Loaded:
    synsets = load_synsets(data_folder(params, ctx))
    derived, counts = derive(synsets, ctx.kind)
    kept = sample(derived, params.max_examples, ctx.seed)
    provenance = {
        "source": f"Debian {params.pin.package}={params.pin.version} > {params.folder}/data.{{noun,verb,adj,adv}}",
        "sha256": params.pin.sha256,
        "licence": LICENCE,
    }
    per_relation = "; ".join(
        f"{r.name} ({r.symbol}): {counts[r.name, 'candidates']} candidates, {counts[r.name, 'ambiguous']} "
        f"ambiguous, {counts[r.name, 'headword']} answer = headword"
        for r in RELATIONS
    )
    candidates = sum(counts[r.name, "candidates"] for r in RELATIONS)
    given_away = sum(bool(_spans(synsets[ex.group].words[0], {ex.record["answer_text"]})) for ex in kept)
    notes = [
        "DERIVED extractive QA: questions are generated by rule from WordNet relations and answers are "
        "spans of the glosses; no person wrote them.",
        "Question: from the headword (the synset's first lemma) and a relation: hypernym 'What is a X a "
        "kind of?' (verbs: 'To X is a way to do what?'), instance hypernym 'What is X an instance of?', "
        "part holonym 'What is a X part of?' (no article before capitalised names; a/an by first letter).",
        "Answer: the one span of the definition (the gloss before its quoted examples) that is a lemma of "
        "a related synset as a whole word, case-insensitive. Context: the whole gloss, whitespace collapsed.",
        f"Synsets read: {len(synsets)}. Candidate questions: {candidates} ({per_relation}). Dropped as "
        "ambiguous: related lemmas match more than one span of the gloss. Dropped as trivial: the answer "
        "is the headword itself.",
        f"Usable questions: {len(derived)}; kept {len(kept)} (max_examples={params.max_examples}, the "
        f"lowest sha256(seed:id), seed {ctx.seed}).",
        "Kept questions whose answer is also a whole word of the question's headword (easy, e.g. 'squash "
        f"ball' -> 'ball'): {given_away} of {len(kept)}.",
        "Grouped by synset: the questions of one synset stay in one split.",
    ]
    return Loaded(pool=kept, provenance=provenance, notes=notes)
