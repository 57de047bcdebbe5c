"""Observability: what records a run and cannot change an output. MLflow runs and their hierarchy
(`runs`), the registry (`registry`), the scaling sweep's cell runs (`cells`); beside this package,
the logged model (`lmforge.logged_model`) and its code (`lmforge.serving`, which imports every
family's model, so it stays a module of its own). No stage depends on these modules
(scripts/dvc_yaml.py's `OBSERVABILITY`): an edit to them reruns nothing. The proof is tests/test_pipeline.py's, which reruns
the stages that track inside their work with the logger off and finds every output unchanged.

The names below are the ones the training code reads from this package.
"""

from lmforge.stage import flatten
from lmforge.tracking.runs import active_run, close_child, inherited_tags, open_child

__all__ = ["active_run", "close_child", "flatten", "inherited_tags", "open_child"]
