"""The distill config: DistilBERT's defaults, the layer map it resolves, one line for each bad value."""

from __future__ import annotations

import pytest

from lmforge.distill.config import DistillConfig, StudentInit, distill_config, layer_map_for
from lmforge.errors import ConfigError


def test_defaults_are_those_of_the_released_distilbert_script():
    cfg = distill_config({})
    assert (cfg.temperature, cfg.alpha_ce, cfg.alpha_task, cfg.alpha_cos) == (2.0, 5.0, 2.0, 1.0)
    assert cfg.init is StudentInit.teacher and cfg.student_layers is None and cfg.layer_map is None
    assert distill_config({"teacher": "hf:minilm"}).hf_source == "minilm"


@pytest.mark.parametrize(
    "teacher_layers, values, want",
    [
        (12, {}, [0, 2, 4, 6, 8, 10]),  # half the depth, every other layer
        (4, {}, [0, 2]),
        (3, {}, [0]),  # half rounded down
        (1, {}, [0]),  # at least one layer
        (12, {"layer_map": [0, 2, 4, 7, 9, 11]}, [0, 2, 4, 7, 9, 11]),  # DistilBERT's own map
        (12, {"student_layers": 3}, [0, 4, 8]),
        (4, {"student_layers": 4}, [0, 1, 2, 3]),  # same depth: a copy
    ],
)
def test_layer_map_defaults_to_every_other_teacher_layer(teacher_layers, values, want):
    assert layer_map_for(distill_config(values), teacher_layers) == want


@pytest.mark.parametrize(
    "values, message",
    [
        ({"temperature": 0.0}, r"distill.temperature: got 0.0, expected a number > 0"),
        ({"temperature": -2.0}, r"distill.temperature: got -2.0, expected a number > 0"),
        ({"alpha_ce": 0, "alpha_task": 0, "alpha_cos": 0}, r"alpha_cos: got all 0, expected at least one"),
        ({"alpha_cos": -1.0}, r"distill.alpha_cos: got -1.0, expected a weight >= 0"),
        ({"layer_map": [0, 4, 2]}, r"distill.layer_map: got \[0, 4, 2\], expected strictly increasing"),
        ({"layer_map": [1, 1]}, r"distill.layer_map: got \[1, 1\], expected strictly increasing"),
        ({"layer_map": [-1, 2]}, r"distill.layer_map: got \[-1, 2\], expected .* >= 0"),
        ({"layer_map": []}, r"distill.layer_map: got \[\], expected one teacher layer per student layer"),
        ({"student_layers": 0}, r"distill.student_layers: got 0, expected an integer >= 1"),
        ({"teacher": "bert"}, r"distill.teacher: got 'bert', expected pretrained or hf:"),
        ({"init": "copy"}, r"distill.init: .*'copy'.*teacher, random"),
        ({"student": {"n_layers": 3}}, r"distill.student.n_layers: got 3, expected it unset"),
        ({"student": {"width": 64}}, r"distill.student.width: unknown field, expected one of: .*d_model"),
    ],
)
def test_bad_values_known_without_the_teacher_are_one_line(values, message):
    with pytest.raises(ConfigError, match=message) as err:
        distill_config(values)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"layer_map": [0, 4]}, r"distill.layer_map: got index 4 in \[0, 4\], expected teacher layers 0..3"),
        ({"student_layers": 5}, r"distill.student_layers: got 5, expected at most the teacher's 4"),
        (
            {"student_layers": 2, "layer_map": [0, 1, 2]},
            r"distill.layer_map: got 3 layers \[0, 1, 2\], expected one per student layer \(student_layers=2",
        ),
    ],
)
def test_a_map_that_does_not_fit_the_teacher_is_one_line(values, message):
    with pytest.raises(ConfigError, match=message):
        layer_map_for(distill_config(values), teacher_layers=4)


def test_a_direct_construction_coerces_the_init_name():
    assert DistillConfig(init="random").init is StudentInit.random
