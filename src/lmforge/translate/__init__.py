"""Translation with the 2017 encoder-decoder (Vaswani et al.): parallel verses, a joint BPE vocabulary,
token-count batches, Noam + label smoothing, checkpoint averaging, greedy and beam search, sacreBLEU."""
