"""Knowledge distillation (DistilBERT, Sanh et al. 2019): a shallower student initialised from its
teacher and trained on the teacher's soft targets, the task loss and a hidden-state cosine loss."""
