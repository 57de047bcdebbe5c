"""`Pin`: one package fetched with its ordinary client, pinned exactly and checked against a sha256."""

from __future__ import annotations

import re
from dataclasses import dataclass

from omegaconf import MISSING

from lmforge.errors import ConfigError


@dataclass
class Pin:
    """One package fetched with its ordinary client, pinned exactly and checked against a sha256."""

    package: str = MISSING  # name in its registry (PyPI, npm, Debian)
    version: str = MISSING  # exact version; Debian versions keep their epoch, e.g. "1:3.0-37"
    sha256: str = MISSING  # of the fetched file (sdist, wheel, .deb)

    def __post_init__(self) -> None:
        if self.sha256 != MISSING and not re.fullmatch(r"[0-9a-f]{64}", self.sha256):
            raise ConfigError(f"sha256={self.sha256!r} of {self.package}; expected 64 lowercase hex digits")
