"""`apt_deb` against fake `apt-get` / `apt-cache` executables on PATH: a version missing from the apt
lists triggers one `apt-get update` per process, then a retry; still missing, one line names the
versions apt has. Nothing touches the network or the real apt."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest

from lmforge.corpora import fetch
from lmforge.corpora.pin import Pin
from lmforge.errors import DataError

# $FAKE_APT/lists: "<package> <version>" lines, this machine's apt lists; $FAKE_APT/archive: what the
# Debian archive holds now, copied into the lists by `update` (which fails as for a non-root user when
# $FAKE_APT/update-fails exists). A listed version gone from the archive answers 404, as a superseded
# security build does; $FAKE_APT/offline makes downloads fail on the network. Every call is logged.
APT_GET = """#!/bin/sh
echo "apt-get $*" >> "$FAKE_APT/log"
case "$1" in
update)
    if [ -e "$FAKE_APT/update-fails" ]; then
        echo "E: Could not open lock file /var/lib/apt/lists/lock - open (13: Permission denied)" >&2
        exit 100
    fi
    cp "$FAKE_APT/archive" "$FAKE_APT/lists"
    ;;
download)
    pkg="${2%%=*}"
    ver="${2#*=}"
    url="http://deb.debian.org/debian-security/pool/updates/main/${pkg}_${ver}_all.deb"
    if [ -e "$FAKE_APT/offline" ]; then
        echo "E: Failed to fetch $url  Temporary failure resolving 'deb.debian.org'" >&2
        exit 100
    elif grep -qxF "$pkg $ver" "$FAKE_APT/lists" && grep -qxF "$pkg $ver" "$FAKE_APT/archive"; then
        printf 'deb bytes' > "${pkg}_${ver}_all.deb"
    elif grep -qxF "$pkg $ver" "$FAKE_APT/lists"; then
        echo "E: Failed to fetch $url  404  Not Found [IP: 151.101.2.132 80]" >&2
        exit 100
    elif grep -q "^$pkg " "$FAKE_APT/lists"; then
        echo "E: Version '$ver' for '$pkg' was not found" >&2
        exit 100
    else
        echo "E: Unable to locate package $pkg" >&2
        exit 100
    fi
    ;;
esac
"""
APT_CACHE = """#!/bin/sh
echo "apt-cache $*" >> "$FAKE_APT/log"
grep "^$2 " "$FAKE_APT/lists" | while read -r pkg ver; do
    echo "$pkg | $ver | http://deb.debian.org/debian bookworm/main amd64 Packages"
done
"""
DEB_SHA = hashlib.sha256(b"deb bytes").hexdigest()


@pytest.fixture
def apt(tmp_path, monkeypatch):
    """apt(lists, archive=lists) -> the call log; fake apt-get/apt-cache first on PATH, no update yet."""
    state = tmp_path / "apt"
    (state / "bin").mkdir(parents=True)
    for name, script in (("apt-get", APT_GET), ("apt-cache", APT_CACHE)):
        path = state / "bin" / name
        path.write_text(script)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{state / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_APT", str(state))
    monkeypatch.setattr(fetch, "_apt_update", None)  # a fresh process

    def setup(lists: str, archive: str | None = None) -> Path:
        (state / "lists").write_text(lists)
        (state / "archive").write_text(lists if archive is None else archive)
        (state / "log").write_text("")
        return state / "log"

    return setup


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines()


def test_a_missing_version_updates_once_then_names_the_versions_apt_has(apt, tmp_path):
    log = apt("python3.11-doc 3.11.2-6+deb12u8\nwordnet-base 1:3.0-37\n")
    with pytest.raises(DataError) as info:
        fetch.apt_deb(Pin("python3.11-doc", "3.11.2-6+deb12u9", DEB_SHA), tmp_path / "cache")
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        "apt-get download python3.11-doc=3.11.2-6+deb12u9 failed (exit 100): E: Version "
        "'3.11.2-6+deb12u9' for 'python3.11-doc' was not found, even after apt-get update; versions of "
        "python3.11-doc in the apt lists (apt-cache madison): 3.11.2-6+deb12u8; pin one of them and the "
        "sha256 of its .deb in the config"
    )
    assert calls(log) == [
        "apt-get download python3.11-doc=3.11.2-6+deb12u9",
        "apt-get update",
        "apt-get download python3.11-doc=3.11.2-6+deb12u9",
        "apt-cache madison python3.11-doc",
    ]
    assert not (tmp_path / "cache" / "apt" / "python3.11-doc-3.11.2-6+deb12u9").exists()

    # a second missing package in the same process: no second update
    log.write_text("")
    with pytest.raises(DataError, match=r"Unable to locate package dict-gcide, even after .*: none;"):
        fetch.apt_deb(Pin("dict-gcide", "0.48.5+nmu2", DEB_SHA), tmp_path / "cache")
    assert calls(log) == ["apt-get download dict-gcide=0.48.5+nmu2", "apt-cache madison dict-gcide"]


def test_update_makes_the_version_appear_and_the_fetch_succeeds(apt, tmp_path):
    log = apt("", archive="dict-gcide 0.48.5+nmu2\n")  # a fresh machine: empty lists
    pin = Pin("dict-gcide", "0.48.5+nmu2", DEB_SHA)
    deb = fetch.apt_deb(pin, tmp_path / "cache")
    assert deb == tmp_path / "cache" / "apt" / "dict-gcide-0.48.5+nmu2" / "dict-gcide_0.48.5+nmu2_all.deb"
    assert calls(log) == [
        "apt-get download dict-gcide=0.48.5+nmu2",
        "apt-get update",
        "apt-get download dict-gcide=0.48.5+nmu2",
    ]
    assert fetch.apt_deb(pin, tmp_path / "cache") == deb and len(calls(log)) == 3  # cached


def test_stale_lists_naming_a_deleted_security_build_are_updated(apt, tmp_path):
    log = apt("python3.11-doc 3.11.2-6+deb12u9\n", archive="python3.11-doc 3.11.2-6+deb12u10\n")
    with pytest.raises(DataError) as info:
        fetch.apt_deb(Pin("python3.11-doc", "3.11.2-6+deb12u9", DEB_SHA), tmp_path / "cache")
    assert "'3.11.2-6+deb12u9' for 'python3.11-doc' was not found, even after apt-get update" in str(
        info.value
    )
    assert "(apt-cache madison): 3.11.2-6+deb12u10;" in str(info.value)
    assert calls(log)[1:] == [
        "apt-get update",
        "apt-get download python3.11-doc=3.11.2-6+deb12u9",
        "apt-cache madison python3.11-doc",
    ]


def test_a_failed_update_is_named(apt, tmp_path):
    log = apt("python3.11-doc 3.11.2-6+deb12u8\n")
    (tmp_path / "apt" / "update-fails").touch()
    with pytest.raises(DataError) as info:
        fetch.apt_deb(Pin("python3.11-doc", "3.11.2-6+deb12u9", DEB_SHA), tmp_path / "cache")
    assert (
        "was not found, and apt-get update failed (exit 100): E: Could not open lock file "
        "/var/lib/apt/lists/lock - open (13: Permission denied); versions of python3.11-doc in the apt "
        "lists (apt-cache madison): 3.11.2-6+deb12u8;"
    ) in str(info.value)
    assert calls(log).count("apt-get update") == 1


def test_other_failures_are_not_an_apt_lists_problem(apt, tmp_path):
    log = apt("python3.11-doc 3.11.2-6+deb12u8\n")
    pin = Pin("python3.11-doc", "3.11.2-6+deb12u8", DEB_SHA)
    (tmp_path / "apt" / "offline").touch()
    with pytest.raises(DataError, match=r"failed \(exit 100\): E: Failed to fetch .* Temporary failure"):
        fetch.apt_deb(pin, tmp_path / "cache")
    (tmp_path / "apt" / "offline").unlink()
    with pytest.raises(DataError, match=r"sha256 of .*_all.deb is [0-9a-f]{64}; expected 0{64}"):
        fetch.apt_deb(Pin(pin.package, pin.version, "0" * 64), tmp_path / "cache")
    assert "apt-get update" not in calls(log)
