"""ModelConfig validation: every bad value fails with one line naming the field and what is allowed."""

from __future__ import annotations

import pytest

from lmforge.errors import ConfigError
from lmforge.model.config import Family, ModelConfig, Position, load_model_config


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"d_model": 30, "n_heads": 4}, "model.d_model: got 30, expected a multiple of n_heads=4"),
        (
            {"d_model": 384, "n_heads": 6, "n_kv_heads": 4},
            "model.n_kv_heads: got 4, expected a divisor of n_heads=6",
        ),
        (
            {"position": "spiral"},
            "model.position: got 'spiral', expected one of: learned, sinusoidal, rope, alibi",
        ),
        ({"sliding_window": 0}, "model.sliding_window: got 0, expected null or a window >= 1"),
        ({"n_heads": "four"}, "model.n_heads: got 'four' (str), expected an integer"),
        ({"dropout": 1.5}, "model.dropout: got 1.5, expected a probability in [0, 1)"),
        ({"family": "encoder", "n_encoder_layers": 2}, "model.n_encoder_layers: got 2, expected null"),
        ({"global_every": 2}, "model.global_every: got 2, expected null without a sliding_window"),
        ({"tie_embeddings": "yes"}, "model.tie_embeddings: got 'yes' (str), expected true or false"),
        ({"n_layers": 0}, "model.n_layers: got 0, expected an integer >= 1"),
    ],
)
def test_invalid_config_raises_one_clear_line(values, needle):
    with pytest.raises(ConfigError) as info:
        load_model_config(values)
    message = str(info.value)
    assert needle in message
    assert "\n" not in message


def test_unknown_field_lists_known_fields():
    with pytest.raises(ConfigError, match=r"model.n_layer: unknown field, expected one of: .*n_layers"):
        load_model_config({"n_layer": 2})


def test_strings_become_enums_and_round_trip():
    config = load_model_config({"name": "x", "family": "encoder_decoder", "position": "relative"})
    assert config.family is Family.encoder_decoder and config.position is Position.relative
    assert ModelConfig(**config.to_dict()) == config
    assert config.to_dict()["family"] == "encoder_decoder"


def test_derived_sizes():
    config = ModelConfig(d_model=64, n_heads=8, n_kv_heads=2, sliding_window=4, global_every=3)
    assert (config.head_size, config.kv_heads) == (8, 2)
    assert [config.is_local(i) for i in range(6)] == [True, True, False, True, True, False]
