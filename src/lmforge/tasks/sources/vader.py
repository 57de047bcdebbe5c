"""Binary sentiment from the human-rated movie-review snippets of VADER (Hutto & Gilbert, ICWSM 2014).

Source: the PyPI source distribution `vaderSentiment==3.3.2` (the wheel holds no data), fetched
with `pip download --no-binary :all:` and pinned by sha256. Inside it,
`additional_resources/hutto_ICWSM_2014.tar.gz` holds `movieReviewSnippets_GroundTruth.txt`:
`id<TAB>mean rating<TAB>text` (CRLF lines), the mean of ~20 raters on [-4, 4] for each of the
10,605 snippets of Pang & Lee's sentence polarity data. Label: positive if the mean is > 0,
negative if < 0; snippets rated exactly 0 are dropped and counted in the card.
"""

from __future__ import annotations

import io
import tarfile
import zlib
from dataclasses import dataclass, field

from lmforge.corpora.fetch import pip_sdist
from lmforge.corpora.pin import Pin
from lmforge.errors import DataError
from lmforge.tasks.records import example
from lmforge.tasks.sources import Context, Loaded

LICENCE = (
    "vaderSentiment and its rating data: MIT (C.J. Hutto); snippets from Pang & Lee (2005), "
    "sentence polarity dataset v1.0, distributed for research"
)


@dataclass
class VaderParams:
    pin: Pin = field(default_factory=Pin)  # PyPI vaderSentiment sdist
    archive: str = "additional_resources/hutto_ICWSM_2014.tar.gz"  # inside the sdist's top folder
    member: str = "movieReviewSnippets_GroundTruth.txt"  # inside the archive: id, mean rating, text
    positive: str = "positive"  # label of a mean rating > 0
    negative: str = "negative"  # label of a mean rating < 0


def read(params: VaderParams, ctx: Context) -> Loaded:
    sdist = pip_sdist(params.pin, ctx.cache)
    text = _member_text(sdist.read_bytes(), params, str(sdist))
    examples, zeros = [], 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        sid, rating, snippet = _fields(line, params.member, lineno)
        if rating == 0:
            zeros += 1
            continue
        label = params.positive if rating > 0 else params.negative
        examples.append(example(ctx.kind, id=f"movie-{sid}", text=" ".join(snippet.split()), label=label))
    provenance = {
        "source": f"PyPI {params.pin.package}=={params.pin.version} (sdist) > {params.archive} > {params.member}",
        "sha256": params.pin.sha256,
        "licence": LICENCE,
    }
    notes = [
        f"Label: {params.positive} if the mean human rating (about 20 raters, scale -4..4) is > 0, "
        f"{params.negative} if < 0.",
        f"Snippets with a mean rating of exactly 0 dropped: {zeros} of {len(examples) + zeros}.",
        "Whitespace collapsed; the text is otherwise as distributed (e.g. '' for double quotes).",
    ]
    return Loaded(pool=examples, provenance=provenance, notes=notes)


def _member_text(sdist: bytes, params: VaderParams, where: str) -> str:
    """The ratings file, read from the archive inside the sdist without extracting either."""
    try:
        inner = _read_member(sdist, params.archive, where)
        data = _read_member(inner, params.member, f"{where} > {params.archive}")
        return data.decode("utf-8-sig")
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
        raise DataError(f"{where} is not a readable .tar.gz ({err}); delete it to fetch it again") from None
    except UnicodeDecodeError as err:
        raise DataError(
            f"{where} > {params.member} is not UTF-8 (byte {err.start}); expected UTF-8"
        ) from None


def _read_member(archive: bytes, suffix: str, where: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar:
            if member.isfile() and (member.name == suffix or member.name.endswith("/" + suffix)):
                return tar.extractfile(member).read()  # type: ignore[union-attr]
    raise DataError(f"{where} holds no */{suffix}; expected the VADER data layout")


def _fields(line: str, member: str, lineno: int) -> tuple[str, float, str]:
    parts = line.split("\t", 2)
    try:
        return parts[0].strip(), float(parts[1]), parts[2]
    except (IndexError, ValueError):
        raise DataError(f"{member}:{lineno} is {line[:60]!r}; expected id<TAB>mean rating<TAB>text") from None
