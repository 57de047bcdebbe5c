"""A training stage's final model as an MLflow pyfunc model (observability, like `lmforge.tracking`,
which logs it): its code is the file `serving.py` beside this one ("models from code": nothing is unpickled when it loads), its artifacts the checkpoint and
the tokenizer, with a signature and an input example that MLflow predicts on when it logs.
"""

from __future__ import annotations

from pathlib import Path

from lmforge.stage import TrainedModel


def log_text_model(model: TrainedModel) -> str:
    """The final model as an MLflow pyfunc model (`lmforge.serving`) named `model`; returns its URI."""
    import mlflow
    import pandas as pd
    import tokenizers
    import torch
    from mlflow.models import infer_signature

    example = pd.DataFrame(
        {k: [v] for k, v in (model.example or {"text": SERVING_EXAMPLES[model.family]}).items()}
    )
    info = mlflow.pyfunc.log_model(
        name="model",
        python_model=str(SERVING),  # the model's code, as a file: MLflow runs it when it loads the model
        artifacts={"checkpoint": model.checkpoint, "tokenizer": model.tokenizer},
        signature=infer_signature(example, ["a string per text"], params={"max_new_tokens": 20}),
        input_example=example,  # MLflow predicts on it when it logs: a model that cannot load fails here
        pip_requirements=[
            f"torch=={torch.__version__}",
            f"tokenizers=={tokenizers.__version__}",
            f"mlflow=={mlflow.__version__}",
            "lmforge",
        ],
    )
    return info.model_uri


SERVING = Path(__file__).with_name(
    "serving.py"
)  # not imported here: its imports are the model's, not the stage's


SERVING_EXAMPLES = {
    "decoder": "The jury said that the city",
    "encoder": "The jury said that the [MASK] had no evidence.",
    "encoder_decoder": "The jury said that <extra_id_0> had no evidence.",
}
