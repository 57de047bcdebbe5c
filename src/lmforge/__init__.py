"""lmforge: raw text to pretrained Transformer language models, reproducibly, and their measurement.

Stages: corpus preparation, WordPiece/BPE tokenizers, encoding, pretraining (BERT MLM + NSP,
RoBERTa, GPT, T5 span corruption), evaluation, labelled tasks and fine-tuning (full, frozen, LoRA),
distillation, translation with the 2017 encoder-decoder, and scaling-law sweeps. Each stage is a
thin entry point in pipelines/ that hands its `Stage` (lmforge.stage) to lmforge.door.
"""

__version__ = "0.1.0"
