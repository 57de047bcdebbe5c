"""The one exception type users see: a single line naming the bad value and what was expected.

Stage entry points catch `LmforgeError`, print its message on one line and exit with status 2, so
a bad config or a corrupt input never ends in a traceback that hides the cause.
"""


class LmforgeError(Exception):
    """Base class; the message must be one line: what was wrong, the bad value, what was expected."""


class ConfigError(LmforgeError, ValueError):
    """A config value of the wrong type or outside its allowed range."""


class DataError(LmforgeError):
    """A missing, corrupt or empty input (corpus, tokenizer, token array, checkpoint)."""


class StorageError(LmforgeError):
    """An output that could not be written for want of room (disk full, quota, file-size limit)."""
