"""The model registry: an evaluated model registered under `lmforge-[<overlay>-]<job>`, with the alias
`candidate` for the newest version and `champion` for the best score so far, and a description
that says what it is (its job, data, score) and how to call it.
"""

from __future__ import annotations


def register(
    client,
    trained: str,
    metrics: dict,
    score: tuple[str, str],
    overlay: str,
    evaluation: str,
    name: str | None = None,
) -> None:
    """Register the trained run's model as `lmforge-[<overlay>-]<name>` (default name: the trained
    run's job, `pretrain-decoder`): alias `candidate`, and `champion` when its score beats the current
    champion's (`min`: lower is better)."""
    import mlflow
    from mlflow.exceptions import MlflowException

    tags = client.get_run(trained).data.tags
    uri, (metric, direction) = tags.get("lmforge_model_uri"), score
    if uri is None or metric not in metrics:
        return
    job = name or tags.get("lmforge_job", trained).replace("@", "-")
    name = f"lmforge-{job}" if overlay in ("none", "default") else f"lmforge-{overlay}-{job}"
    value = float(metrics[metric])
    version = mlflow.register_model(
        uri, name, tags={metric: str(value), "evaluation_run_id": evaluation}
    ).version
    client.update_model_version(
        name, version, description=describe(name, uri, tags, metric, value, direction)
    )
    client.set_registered_model_alias(name, "candidate", version)
    try:
        champion = client.get_model_version_by_alias(name, "champion")
        best = float(champion.tags.get(metric, "nan"))
    except MlflowException:
        champion, best = None, float("nan")
    better = value < best if direction == "min" else value > best
    if champion is None or better or best != best:
        client.set_registered_model_alias(name, "champion", version)


def describe(name: str, uri: str, tags: dict[str, str], metric: str, value: float, direction: str) -> str:
    """A version's description: the job and data it came from, its score, and the call that loads
    it and predicts on the columns of its signature."""
    import mlflow

    try:
        columns = mlflow.models.get_model_info(uri).signature.inputs.input_names()
    except Exception:  # a model logged without a signature
        columns = ["text"]
    frame = ", ".join(f'"{c}": ["..."]' for c in columns)
    better = "lower" if direction == "min" else "higher"
    return (
        f"{tags.get('lmforge_job', 'a run')} (stage {tags.get('dvc_stage', '?')}, overlay "
        f"{tags.get('experiment', 'none')}), trained on prepared data {tags.get('data_hash', '?')} at commit "
        f"{tags.get('git_commit', '?')[:12]}. {metric} = {value:.4g} ({better} is better); the champion "
        f"alias names the best version so far. Call it: import mlflow, pandas as pd; "
        f'mlflow.pyfunc.load_model("models:/{name}@champion").predict(pd.DataFrame({{{frame}}})). '
        "A registered model is code: loading it runs its serving.py."
    )
