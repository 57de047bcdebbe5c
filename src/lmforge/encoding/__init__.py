"""Encoding: the prepared corpus (`lmforge.data`) turned into token arrays by a trained tokenizer
(`lmforge.tokenizer`).

It sits above both, so neither imports the other's way up. Stage entry function:
`lmforge.encoding.encode.run`; the arrays' format and reader stay in `lmforge.data.encoded`.
"""
