"""Brown Corpus tags collapsed to the 12 universal tags of Petrov, Das & McDonald (2012),
"A Universal Part-of-Speech Tagset" (LREC; arXiv:1104.2086).

The table maps the ~85 simple Brown tags (Francis & Kucera's manual) to the universal categories by
the paper's definitions. It was written from those definitions, not copied from the paper's
`en-brown.map`, and may differ from it on borderline tags (e.g. `ap` "many/other" -> ADJ here).
Compound tags are reduced to a simple tag by this rule, in order:
1. `fw-...` (foreign word, with the tag the word would have in its language) -> X;
2. drop the suffixes `-hl` (headline), `-tl` (title), `-nc` (cited word), also when the corpus
   truncated them to `-h`, `-t`, `-n`;
3. `a+b` (contractions such as `ppss+bem` "I'm") -> the first part `a`;
4. a trailing `*` (negated forms such as `bez*` "isn't") is dropped; `*` alone ("not") is ADV;
5. a trailing `$` (possessive, e.g. `nn$`) is dropped unless the tag is in the table as it is.
A tag still unknown after this maps to X and is counted in the card.
"""

from __future__ import annotations

UNIVERSAL = (".", "ADJ", "ADP", "ADV", "CONJ", "DET", "NOUN", "NUM", "PRON", "PRT", "VERB", "X")

_GROUPS = {
    ".": ". , : ( ) -- `` '' '",
    "ADJ": "jj jjr jjs jjt od ap",
    "ADP": "in cs",  # subordinating conjunctions are adpositions in the universal set (as PTB's IN)
    "ADV": "* abl ql qlp rb rbr rbt rn wql wrb",
    "CONJ": "cc",
    "DET": "abn abx at dt dti dts dtx ex wdt",
    "NOUN": "nn nns np nps nr nrs",
    "NUM": "cd",
    "PRON": "pn pp$ pp$$ ppl ppls ppo pps ppss wp$ wpo wps",
    "PRT": "rp to",
    "VERB": "be bed bedz beg bem ben ber bez do dod doz hv hvd hvg hvn hvz md vb vbd vbg vbn vbz",
    "X": "fw uh nil",
}
BROWN_TO_UNIVERSAL = {tag: universal for universal, tags in _GROUPS.items() for tag in tags.split()}
_SUFFIXES = ("-hl", "-tl", "-nc", "-h", "-t", "-n")


def simple_tag(tag: str) -> str:
    """The simple Brown tag behind a compound one (rules 2-5 of the module docstring)."""
    tag = tag.lower()
    stripped = True
    while stripped and tag not in BROWN_TO_UNIVERSAL:
        stripped = False
        for suffix in _SUFFIXES:
            if tag.endswith(suffix) and len(tag) > len(suffix):
                tag, stripped = tag[: -len(suffix)], True
                break
    tag = tag.split("+", 1)[0] if len(tag) > 1 else tag
    if tag.endswith("*") and tag != "*":
        tag = tag[:-1]
    if tag not in BROWN_TO_UNIVERSAL and tag.endswith("$"):
        tag = tag[:-1]
    return tag


def universal(tag: str) -> str | None:
    """The universal tag of a Brown tag, or None if the table does not know it."""
    if tag.lower().startswith("fw-"):
        return "X"
    return BROWN_TO_UNIVERSAL.get(simple_tag(tag))
