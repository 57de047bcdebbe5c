"""Data: sources (fetch + normalise), document splits, encoded token arrays and torch datasets.

Stage entry functions: `lmforge.data.prepare.run` (the encode stage, which also needs a
tokenizer, is `lmforge.encoding.encode.run`, one floor up).
"""
