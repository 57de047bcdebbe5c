"""lmforge's Hydra sweeper plugin: `hydra/sweeper=optuna` (conf/hydra/sweeper/optuna.yaml) searches a
stage's settings with an Optuna sampler; see `sweeper`."""
