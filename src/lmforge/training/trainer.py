"""The Lightning `Trainer` of a stage: the `trainer` group's settings plus the stage's own wiring.

Lightning checks accelerator, devices, strategy and precision when the Trainer is built; a setting
this machine cannot run (an accelerator it lacks, an unknown strategy) becomes one `ConfigError`
line naming the settings, raised before the stage has written or deleted anything.
"""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.fabric.utilities.exceptions import MisconfigurationException

from lmforge.errors import ConfigError

CHECKED = ("accelerator", "devices", "num_nodes", "strategy", "precision")  # what Lightning may refuse


def build_trainer(settings: dict[str, Any], **wiring: Any) -> L.Trainer:
    """`L.Trainer(**settings, **wiring)`; `settings` are the `trainer` group's values (without `name`)."""
    try:
        return L.Trainer(**settings, **wiring)
    except (MisconfigurationException, ValueError, ImportError) as err:  # ImportError: tpu without torch_xla
        given = ", ".join(f"trainer.{key}={settings[key]}" for key in CHECKED if key in settings)
        reason = " ".join(str(err).split())[:200]
        raise ConfigError(
            f"trainer: {given} refused by Lightning ({reason}); expected settings this machine can run"
        ) from None
