"""The student: the teacher's config with fewer layers; its weights are the mapped teacher layers,
embeddings and heads, copied; width and vocabulary changes are one line."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from helpers import student_of, tiny
from lmforge.distill.config import DistillConfig
from lmforge.distill.student import check_compatible, init_student, student_config
from lmforge.errors import ConfigError
from lmforge.model import build_model


def teacher_model(**overrides):
    torch.manual_seed(0)
    return build_model(tiny(**overrides))


def assert_same_weights(student: torch.nn.Module, teacher: torch.nn.Module) -> None:
    student_state, teacher_state = student.state_dict(), teacher.state_dict()
    assert student_state.keys() == teacher_state.keys()
    for key, value in student_state.items():
        assert torch.equal(value, teacher_state[key]), key


def test_student_layers_are_the_teacher_layers_of_distilberts_map():
    teacher = teacher_model(
        family="encoder", position="learned", n_segments=2, n_layers=12, head_transform=True
    )
    config = teacher.config
    layer_map = [0, 2, 4, 7, 9, 11]
    student = student_of(teacher, config, DistillConfig(layer_map=layer_map))
    assert student.config == dataclasses.replace(config, n_layers=6)
    for i, j in enumerate(layer_map):
        assert_same_weights(student.stack.layers[i], teacher.stack.layers[j])
    outside = {k: v for k, v in student.state_dict().items() if not k.startswith("stack.layers.")}
    assert {"embeddings.tok.weight", "embeddings.seg.weight", "head.transform.0.weight"} <= set(outside)
    for key, value in outside.items():  # embeddings, final norm, MLM head (tied output)
        assert torch.equal(value, teacher.state_dict()[key]), key
    assert student.embeddings.tok.weight.data_ptr() != teacher.embeddings.tok.weight.data_ptr()  # a copy


def test_default_student_of_a_decoder_takes_every_other_layer():
    teacher = teacher_model(n_layers=4)
    student = student_of(teacher, teacher.config, DistillConfig())
    assert len(student.stack.layers) == 2
    for i, j in enumerate([0, 2]):
        assert_same_weights(student.stack.layers[i], teacher.stack.layers[j])


def test_a_full_depth_student_with_the_identity_map_is_the_teacher():
    teacher = teacher_model(family="encoder", n_layers=3)
    student = student_of(teacher, teacher.config, DistillConfig(student_layers=3))
    assert_same_weights(student, teacher)
    ids = torch.randint(0, 61, (2, 9), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(student(ids).logits, teacher(ids).logits, rtol=0, atol=0)


def test_random_init_may_change_the_width_and_copies_nothing():
    teacher = teacher_model(n_layers=4)
    narrow = {"d_model": 16, "n_heads": 2, "d_ff": 32}
    with pytest.raises(
        ConfigError, match=r"distill.alpha_cos: got 1.0 with student width 16 and teacher width 32"
    ):
        student_of(teacher, teacher.config, DistillConfig(init="random", student=narrow))
    cfg = DistillConfig(init="random", student=narrow, alpha_cos=0.0)  # no cosine between widths
    student = student_of(teacher, teacher.config, cfg)
    assert (student.config.d_model, student.config.n_layers, student.config.vocab_size) == (16, 2, 61)
    same_depth = student_of(teacher, teacher.config, DistillConfig(init="random", student_layers=4))
    assert not torch.equal(
        same_depth.stack.layers[0].mlp.fc_in.weight, teacher.stack.layers[0].mlp.fc_in.weight
    )


def test_a_width_change_with_init_teacher_is_one_line():
    config = tiny(n_layers=4)
    with pytest.raises(
        ConfigError, match=r"distill.student.d_model: got 16, expected the teacher's 32 with init"
    ):
        student_config(config, DistillConfig(student={"d_model": 16, "n_heads": 2}))


@pytest.mark.parametrize("init", ["teacher", "random"])
def test_a_different_vocabulary_is_one_line_whatever_the_init(init):
    with pytest.raises(ConfigError, match=r"distill.student: got vocab_size=50, expected the teacher's 61"):
        student_config(tiny(n_layers=4), DistillConfig(init=init, student={"vocab_size": 50}))
    with pytest.raises(ConfigError, match=r"got vocab_size=70, expected the teacher's 61"):
        check_compatible(tiny(), tiny(vocab_size=70), DistillConfig(init=init).init)


def test_an_override_modelconfig_refuses_is_one_line_naming_the_group():
    with pytest.raises(ConfigError, match=r"distill.student: model.d_model: got 'wide'"):
        student_config(tiny(), DistillConfig(init="random", student={"d_model": "wide"}))


def test_an_encoder_decoder_teacher_is_one_line():
    with pytest.raises(
        ConfigError, match=r"distill.teacher: got family encoder_decoder, expected an encoder"
    ):
        student_config(tiny(family="encoder_decoder"), DistillConfig())


def test_init_student_checks_the_map_and_every_weight():
    teacher = teacher_model(n_layers=4)
    with pytest.raises(ConfigError, match=r"got index 4 in \[0, 4\], expected teacher layers 0..3"):
        init_student(build_model(tiny(n_layers=2)), teacher, [0, 4])
    with pytest.raises(ConfigError, match=r"student_layers: got 5, expected at most the teacher's 4"):
        init_student(build_model(tiny(n_layers=5)), teacher, [0, 1, 2, 3, 4])
    with pytest.raises(
        ConfigError, match=r"mlp.fc_in.bias is \(48,\) in the student and \(64,\) in the teacher"
    ):
        init_student(build_model(tiny(n_layers=2, d_ff=48)), teacher, [0, 2])
    with pytest.raises(ConfigError, match=r"student weight embeddings.pos.weight has no teacher weight"):
        init_student(build_model(tiny(n_layers=2, position="learned")), teacher, [0, 2])
