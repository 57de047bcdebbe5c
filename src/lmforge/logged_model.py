"""A training stage's final model as an MLflow pyfunc model (observability, like `lmforge.tracking`,
which logs it): its code is the file `serving.py` beside this one, and the lmforge code it runs
travels with it ("models from code": nothing is unpickled when it loads), its artifacts the checkpoint and
the tokenizer, with a signature and an input example that MLflow predicts on when it logs.
"""

from __future__ import annotations

import os
from pathlib import Path

from lmforge.stage import TrainedModel


def log_text_model(model: TrainedModel) -> str:
    """The final model as an MLflow pyfunc model (`lmforge.serving`) named `model`; returns its URI.
    It ships the lmforge code it runs (artifact `lmforge`, see `code_archive`) and pins what that code
    needs (`requirements`), so it loads where lmforge is not installed, or another version is."""
    import mlflow
    import pandas as pd
    from mlflow.models import infer_signature

    example = pd.DataFrame(
        {k: [v] for k, v in (model.example or {"text": SERVING_EXAMPLES[model.family]}).items()}
    )
    info = mlflow.pyfunc.log_model(
        name="model",
        python_model=str(SERVING),  # the model's code, as a file: MLflow runs it when it loads the model
        artifacts={
            "checkpoint": model.checkpoint,
            "tokenizer": model.tokenizer,
            "lmforge": str(code_archive()),
        },
        signature=infer_signature(example, ["a string per text"], params={"max_new_tokens": 20}),
        input_example=example,  # MLflow predicts on it when it logs: a model that cannot load fails here
        pip_requirements=requirements(),
    )
    return info.model_uri


def requirements() -> list[str]:
    """lmforge's own dependencies at their installed versions, each `name==version`, as a fresh
    environment installs them from the package index: torch by its release (`2.13.0`, not the local
    CPU build's `2.13.0+cpu`, a name no index serves; for the CPU build, point pip at PyTorch's CPU
    wheel index). lmforge itself is not among them: the model ships its code."""
    from importlib import metadata

    from packaging.requirements import Requirement

    pinned = []
    for spec in metadata.requires("lmforge") or []:
        requirement = Requirement(spec)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue  # an extra's (dev, team, cluster, bench)
        version = metadata.version(requirement.name).split("+")[0]
        pinned.append(f"{requirement.name}=={version}")
    return sorted(pinned, key=str.lower)


def code_archive() -> Path:
    """The lmforge package's source as one zip (Python imports from it on `sys.path`), named by
    version and content, built once per content under the system's temporary folder."""
    import hashlib
    import tempfile
    import zipfile

    import lmforge

    package = Path(lmforge.__file__).parent
    files = sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(package.parent).as_posix().encode() + b"\0" + path.read_bytes())
    archive = (
        Path(tempfile.gettempdir())
        / "lmforge-code"
        / f"lmforge-{lmforge.__version__}-{digest.hexdigest()[:16]}.zip"
    )
    if not archive.is_file():
        archive.parent.mkdir(parents=True, exist_ok=True)
        partial = archive.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in files:  # fixed times: the same code gives the same bytes
                info = zipfile.ZipInfo(
                    path.relative_to(package.parent).as_posix(), date_time=(1980, 1, 1, 0, 0, 0)
                )
                zf.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
        os.replace(partial, archive)
    return archive


SERVING = Path(__file__).with_name(
    "serving.py"
)  # not imported here: its imports are the model's, not the stage's


SERVING_EXAMPLES = {
    "decoder": "The jury said that the city",
    "encoder": "The jury said that the [MASK] had no evidence.",
    "encoder_decoder": "The jury said that <extra_id_0> had no evidence.",
}
