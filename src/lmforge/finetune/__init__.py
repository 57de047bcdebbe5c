"""Fine-tuning on labelled tasks: what trains (LoRA, freezing), task metrics and baselines, heads."""
