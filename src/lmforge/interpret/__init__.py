"""Interpretability of a trained decoder: attention maps, the logit lens, induction heads and
in-context learning across the pretraining checkpoints (issue 28). Each concern is its own module;
`stage.run` is the `interpret` stage that writes their numbers and figures."""
