"""Data: sources (fetch + normalise), document splits, encoded token arrays and torch datasets.

Stage entry functions: `lmforge.data.prepare.run` and `lmforge.data.encode.run`.
"""
