"""Which stages of the two DVC pipelines lag the code, what a catch-up costs, and the marks that say so.

The default pipeline (dvc.yaml) is rerun and locked at every commit of main; the experiments
(pipelines/experiments/dvc.yaml, hours) may lag the code, never silently. This package reads the
committed locks, the code and each stage's run record (`runs.json` beside the lock: the commit it ran
at, its seconds, the producer outputs it read) and says which stages are owed, writes the marks that
findings and the docs show, and reruns owed stages within a time budget:

    python -m lmforge.freshness status            # `make status`
    python -m lmforge.freshness status --write    # + pipelines/experiments/stale.json and the docs' marks
    python -m lmforge.freshness catch-up --budget 2h   # `make catch-up BUDGET=2h`

No pipeline stage imports it: it reads the pipelines from outside.
"""
