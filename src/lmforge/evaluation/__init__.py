"""Evaluation: test metrics beside a unigram baseline, text samples and loss-curve plots."""
