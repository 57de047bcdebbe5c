"""lmforge: raw text to pretrained Transformer language models, reproducibly, and their measurement.

Stages today: corpus preparation, WordPiece/BPE tokenizers, encoding, pretraining (BERT MLM + NSP,
RoBERTa, GPT, T5 span corruption) and evaluation; distillation, fine-tuning, translation and
scaling-law sweeps are planned, not built yet.
"""

__version__ = "0.1.0"
