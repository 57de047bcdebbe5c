"""Training: the LightningModule, the data module, optimisers, schedules and the pretrain stage."""
