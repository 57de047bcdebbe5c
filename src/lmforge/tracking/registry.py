"""The model registry: an evaluated model registered under `lmforge-[<overlay>-]<job>`, with the alias
`candidate` for the newest version and `champion` for the best score so far.
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
    client.set_registered_model_alias(name, "candidate", version)
    try:
        champion = client.get_model_version_by_alias(name, "champion")
        best = float(champion.tags.get(metric, "nan"))
    except MlflowException:
        champion, best = None, float("nan")
    better = value < best if direction == "min" else value > best
    if champion is None or better or best != best:
        client.set_registered_model_alias(name, "champion", version)
