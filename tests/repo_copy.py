"""A scratch copy of the repository for tests that run DVC: the working tree's tracked and untracked,
not ignored files (so uncommitted edits are tested too), as a fresh git repository of one commit.
Outputs that DVC tracks (data/, artifacts/) are ignored by git and therefore not copied."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def copy_repository(dest: Path) -> Path:
    """Copy the repository into `dest` and commit it there; returns `dest`."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():  # a file deleted but not yet staged is still listed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(git + args, cwd=dest, check=True)
    return dest
