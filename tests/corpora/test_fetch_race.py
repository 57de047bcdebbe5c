"""Two processes fetching the same pin at once: the one that renames second keeps the first's entry."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from lmforge.corpora import fetch
from lmforge.corpora.pin import Pin

SDIST = b"sdist bytes"
PIN = Pin("pkg", "1.0", hashlib.sha256(SDIST).hexdigest())


def _publish_meanwhile(entry: Path, name: str, data: bytes):
    """A client run that, while this process downloads, lets another process publish `entry` whole."""

    def fake_run(cmd, cwd):
        (cwd / name).write_bytes(data)  # our own download, into the staging folder
        entry.mkdir(parents=True)
        (entry / name).write_bytes(data)  # the other process's rename has landed

    return fake_run


def test_an_entry_that_appears_before_the_rename_is_kept_and_the_staging_copy_dropped(tmp_path, monkeypatch):
    entry = tmp_path / "pip" / "pkg-1.0"
    monkeypatch.setattr(fetch, "_run", _publish_meanwhile(entry, "pkg-1.0.tar.gz", SDIST))
    path = fetch.pip_sdist(PIN, tmp_path)
    assert path == entry / "pkg-1.0.tar.gz" and path.read_bytes() == SDIST
    assert sorted(p.name for p in (tmp_path / "pip").iterdir()) == ["pkg-1.0"]  # no staging folder left


def test_an_unpacked_deb_that_appears_before_the_rename_is_kept(tmp_path, monkeypatch):
    deb = tmp_path / "apt" / "pkg-1.0" / "pkg_1.0_all.deb"
    deb.parent.mkdir(parents=True)
    deb.write_bytes(b"deb")
    root = tmp_path / "apt" / "pkg-1.0.root"

    def fake_dpkg(cmd, cwd):
        (Path(cmd[-1]) / "usr").mkdir(parents=True)  # our own `dpkg -x`
        (root / "usr").mkdir(parents=True)  # the other process's, renamed into place first

    monkeypatch.setattr(fetch, "_run", fake_dpkg)
    assert fetch.unpack_deb(deb) == root
    assert sorted(p.name for p in root.parent.iterdir()) == ["pkg-1.0", "pkg-1.0.root"]


def test_a_failed_rename_with_no_entry_in_its_place_is_not_hidden(tmp_path, monkeypatch):
    def no_rename(self, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fetch, "_run", lambda cmd, cwd: (cwd / "pkg-1.0.tar.gz").write_bytes(SDIST))
    monkeypatch.setattr(Path, "rename", no_rename)
    with pytest.raises(OSError, match="No space left"):
        fetch.pip_sdist(PIN, tmp_path)
