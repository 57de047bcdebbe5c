"""Labelled task datasets for fine-tuning: each task's raw source turned into fixed splits, written once.

A task is described entirely by a yaml under `conf/task/` (schema: `lmforge.tasks.config`). Its
source is looked up in `lmforge.tasks.registry.SOURCES`; `lmforge.tasks.build.run` reads, splits,
validates and writes `{out_dir}/{train,val,test}.jsonl` plus `card.md` / `card.json`.
"""
