"""Send what earlier runs could not: the journals under .lmforge/tracking/pending/ (metric batches a
run's outbox could not deliver, and run ends the server did not take) go to their store, and each
delivered whole is removed. Every tracked stage does this when it starts; by hand:

    python -m lmforge.tracking.backfill                 # the store of MLFLOW_TRACKING_URI (or mlruns.db)
    python -m lmforge.tracking.backfill --uri http://127.0.0.1:5000

Exit 0 when nothing waits any more, 1 when some journal still waits (its store did not answer).
"""

from __future__ import annotations

import argparse
import os
import sys

from lmforge.tracking.record import backfill

DEFAULT_URI = "sqlite:///mlruns.db"  # conf/logger/mlflow.yaml's default


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", default=os.environ.get("MLFLOW_TRACKING_URI", DEFAULT_URI))
    args = parser.parse_args(argv)
    done, waiting = backfill(args.uri)
    print(f"backfilled {done} run(s); {waiting} still waiting")
    return 1 if waiting else 0


if __name__ == "__main__":
    sys.exit(main())
