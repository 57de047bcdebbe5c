"""ModelConfig: one dataclass of plain values and Enums that expresses every Transformer we build.

BERT (Devlin et al. 2018), GPT-2 (Radford et al. 2019), LLaMA (Touvron et al. 2023), Mistral
(Jiang et al. 2023), the 2017 Transformer (Vaswani et al.) and T5 (Raffel et al. 2020) differ only in
the values below, never in code paths keyed on a model's name. Plain values keep the config
serialisable: it round-trips through Hydra, MLflow params and Lightning checkpoints.

`load_model_config` merges a yaml/dict onto this schema and turns every type or range problem into a
single-line `ConfigError` that names the field, the bad value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

from lmforge.errors import ConfigError
from lmforge.structured import Group, enum_value, plain


class Family(str, Enum):
    encoder = "encoder"  # BERT: bidirectional self-attention
    decoder = "decoder"  # GPT, LLaMA, Mistral: causal self-attention
    encoder_decoder = "encoder_decoder"  # 2017 Transformer, T5: encoder + causal decoder with cross-attention


class Position(str, Enum):
    learned = "learned"  # trained absolute embeddings (BERT, GPT-2)
    sinusoidal = "sinusoidal"  # fixed sin/cos table (Vaswani et al. 2017, section 3.5)
    rope = "rope"  # rotary embeddings applied to q and k (Su et al. 2021)
    alibi = "alibi"  # linear distance penalty per head (Press et al. 2022)
    relative = "relative"  # T5 bucketed relative position bias, shared by the layers of a stack
    none = "none"  # no position information (causal models can still infer it)


class Norm(str, Enum):
    layer = "layer"  # LayerNorm (Ba et al. 2016)
    rms = "rms"  # RMSNorm (Zhang & Sennrich 2019)


class Placement(str, Enum):
    pre = "pre"  # x + f(norm(x)) (GPT-2, LLaMA, T5); needs a final norm
    post = "post"  # norm(x + f(x)) (2017 "Add & Norm", BERT)


class Activation(str, Enum):
    relu = "relu"  # 2017 Transformer, T5 v1.0
    gelu = "gelu"  # exact (erf) GELU: BERT
    gelu_tanh = "gelu_tanh"  # tanh approximation of GELU: GPT-2's `gelu_new`
    swiglu = "swiglu"  # gated SiLU MLP (Shazeer 2020; LLaMA, Mistral)
    geglu = "geglu"  # gated GELU (tanh approximation) MLP (Shazeer 2020; T5 v1.1 `gated-gelu`)
    relu2 = "relu2"  # squared ReLU, relu(x)^2 (So et al. 2021, Primer; the modded-nanogpt speedrun)


_ENUM_FIELDS: dict[str, type[Enum]] = {
    "family": Family,
    "position": Position,
    "norm": Norm,
    "norm_placement": Placement,
    "activation": Activation,
}


@dataclass(frozen=True)
class ModelConfig:
    """Every architecture knob. Validated on construction; see `load_model_config` for yaml input."""

    family: Family = Family.decoder  # which stacks exist and whether self-attention is causal
    vocab_size: int = 8192  # rows of the token embedding (and columns of the output projection)
    d_model: int = 256  # residual stream width
    n_layers: int = 4  # layers of the stack (the decoder's, for encoder_decoder)
    n_encoder_layers: int | None = None  # encoder_decoder only; None -> n_layers
    n_heads: int = 4  # query heads
    n_kv_heads: int | None = None  # None -> n_heads (MHA); 1 -> MQA; a divisor of n_heads -> GQA
    head_dim: int | None = None  # None -> d_model // n_heads
    d_ff: int = 1024  # hidden width of the MLP (per branch for SwiGLU)
    mlp: bool = True  # an MLP sublayer in every layer; false: attention-only (Elhage et al. 2021)
    max_seq_len: int = 256  # longest sequence (size of learned/sinusoidal tables, KV cache bound)

    position: Position = Position.rope  # how tokens learn where they are
    rope_base: float = 10000.0  # RoPE wavelength base theta
    relative_buckets: int = 32  # T5 relative bias: number of buckets
    relative_max_distance: int = 128  # T5 relative bias: distances beyond this share the last bucket

    norm: Norm = Norm.layer  # LayerNorm or RMSNorm everywhere
    norm_placement: Placement = Placement.pre  # pre-norm residual or 2017 post-norm "Add & Norm"
    norm_eps: float = 1e-5  # epsilon inside every norm
    final_norm: bool = True  # a norm after the last layer (pre-norm models need it; post-norm ends normed)
    embedding_norm: bool = False  # a norm right after the embedding sum (BERT)

    activation: Activation = Activation.gelu  # MLP non-linearity; swiglu and geglu add a gate projection
    bias: bool = True  # biases in attention and MLP projections (off in LLaMA and T5)

    attention_scale: float | None = None  # scores = q.k * scale; None -> 1/sqrt(head_dim); T5 uses 1.0
    # RMSNorm (with a gain) of each head's queries and keys before RoPE, so attention logits stay
    # bounded whatever the weights grow to (Dehghani et al. 2023; OLMo 2, Qwen3, modded-nanogpt)
    qk_norm: bool = False
    sliding_window: int | None = None  # None -> full attention; w -> each query sees the last w keys
    global_every: int | None = None  # with sliding_window: every k-th layer attends globally (local/global)

    tie_embeddings: bool = True  # output projection shares the token-embedding matrix
    scale_embeddings: bool = False  # multiply token embeddings by sqrt(d_model) (Vaswani et al. 2017)
    scale_output: bool = False  # last hidden state * d_model^-0.5 before the vocab projection (T5, tied)
    n_segments: int = 0  # token-type (segment) embeddings for sentence pairs; 2 for BERT, 0 -> none
    head_transform: bool = False  # BERT MLM head: dense + activation + norm before the vocab projection
    head_bias: bool = False  # a bias on the vocabulary projection (BERT)
    # logits = c * tanh(logits / c): bounded logits, so no token's logit can run away (Gemma 2, the
    # modded-nanogpt speedrun uses 15 to 30); null -> off
    logit_softcap: float | None = None

    dropout: float = 0.0  # residual dropout (after attention and MLP, before the residual add)
    embedding_dropout: float = 0.0  # dropout on the summed embeddings
    attention_dropout: float = 0.0  # dropout on attention probabilities

    init_std: float = 0.02  # std of the normal init of weights; residual outputs get /sqrt(2 * layers)
    # residual outputs (attention out_proj, MLP fc_out) start at zero, so every layer starts as the
    # identity (modded-nanogpt; Fixup/ReZero's idea); false: normal / sqrt(2 * layers) (GPT-2)
    zero_init_residual: bool = False
    # k tables of per-token values mixed into self-attention's values, v = a * v + b * table[token]
    # with learnt a, b (0.5 each at init): layers 0..k-1 read tables 0..k-1 and the last k layers read
    # them again in order, as in the modded-nanogpt speedrun; 0 -> off. Encoder and decoder families.
    value_embeddings: int = 0
    # every layer's input mixes in the embedding output, x = a * x + b * x0, with learnt a, b (1 and 0
    # at init, so the model starts as without it): the speedrun's skip connections from the embedding
    embedding_skip: bool = False
    pad_token_id: int = 0  # padding id (its embedding row is still trained; masks exclude it)

    def __post_init__(self) -> None:
        for name, enum in _ENUM_FIELDS.items():
            value = getattr(self, name)
            if not isinstance(value, enum):
                object.__setattr__(self, name, enum_value(enum, value, f"model.{name}"))  # frozen
        for f in fields(self):
            if f.name not in _ENUM_FIELDS:
                _check_type(f.name, getattr(self, f.name), f.type)
        self._check_ranges()

    def _check_ranges(self) -> None:
        positive = ["vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_seq_len", "relative_buckets"]
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"model.{name}: got {getattr(self, name)}, expected an integer >= 1")
        for name in ["n_encoder_layers", "n_kv_heads", "head_dim", "global_every"]:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"model.{name}: got {value}, expected null or an integer >= 1")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ConfigError(
                f"model.sliding_window: got {self.sliding_window}, expected null or a window >= 1"
            )
        if self.global_every is not None and self.sliding_window is None:
            raise ConfigError(
                f"model.global_every: got {self.global_every}, expected null without a sliding_window"
            )
        if self.head_dim is None and self.d_model % self.n_heads:
            raise ConfigError(
                f"model.d_model: got {self.d_model}, expected a multiple of n_heads={self.n_heads} (or set head_dim)"
            )
        if self.n_heads % self.kv_heads:
            raise ConfigError(
                f"model.n_kv_heads: got {self.n_kv_heads}, expected a divisor of n_heads={self.n_heads}"
            )
        if self.position is Position.rope and self.head_size % 2:
            raise ConfigError(f"model.head_dim: got {self.head_size}, expected an even size for rope")
        for name in ["dropout", "embedding_dropout", "attention_dropout"]:
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(
                    f"model.{name}: got {getattr(self, name)}, expected a probability in [0, 1)"
                )
        for name in ["norm_eps", "init_std", "rope_base"]:
            if getattr(self, name) <= 0:
                raise ConfigError(f"model.{name}: got {getattr(self, name)}, expected a number > 0")
        if self.logit_softcap is not None and self.logit_softcap <= 0:
            raise ConfigError(f"model.logit_softcap: got {self.logit_softcap}, expected null or a number > 0")
        if self.attention_scale is not None and self.attention_scale <= 0:
            raise ConfigError(
                f"model.attention_scale: got {self.attention_scale}, expected null or a number > 0"
            )
        if self.n_encoder_layers is not None and self.family is not Family.encoder_decoder:
            raise ConfigError(
                f"model.n_encoder_layers: got {self.n_encoder_layers}, expected null for family={self.family.value}"
            )
        if not 0 <= self.value_embeddings <= self.n_layers:
            raise ConfigError(
                f"model.value_embeddings: got {self.value_embeddings}, expected 0 to n_layers={self.n_layers} tables"
            )
        for name in ("value_embeddings", "embedding_skip"):
            if getattr(self, name) and self.family is Family.encoder_decoder:
                raise ConfigError(
                    f"model.{name}: got {getattr(self, name)}, expected {0 if name == 'value_embeddings' else False}"
                    " for family=encoder_decoder (built for the encoder and decoder families)"
                )
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"model.pad_token_id: got {self.pad_token_id}, expected 0 <= id < vocab_size")

    # Derived sizes, so no code recomputes them differently.
    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def head_size(self) -> int:
        return self.head_dim or self.d_model // self.n_heads

    @property
    def encoder_layers(self) -> int:
        return self.n_encoder_layers or self.n_layers

    def value_table(self, layer: int) -> int | None:
        """The value-embedding table `layer` (0-based) reads: i for the first k layers, then the last k
        layers read 0..k-1 again; None for the layers between (and with value_embeddings=0)."""
        k = self.value_embeddings
        if k == 0:
            return None
        if layer < k:
            return layer
        if layer >= self.n_layers - k:
            return layer - (self.n_layers - k)
        return None

    def is_local(self, layer: int) -> bool:
        """Whether `layer` (0-based) uses the sliding window; with global_every=k, layers k-1, 2k-1, ... are global."""
        if self.sliding_window is None:
            return False
        return not (self.global_every and (layer + 1) % self.global_every == 0)

    def to_dict(self) -> dict[str, Any]:
        """Plain values only (Enums as strings): for yaml, MLflow params and checkpoints."""
        return plain(self)


_TYPE_NAMES = {"int": "an integer", "float": "a number", "bool": "true or false"}


def _check_type(name: str, value: Any, annotation: str) -> None:
    """Check a value against its (string) annotation: int, float, bool, or `X | None`."""
    optional = annotation.endswith("| None")
    base = annotation.replace("| None", "").strip()
    if value is None:
        if optional:
            return
        raise ConfigError(f"model.{name}: got null, expected {_TYPE_NAMES[base]}")
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
    }[base]
    if not ok:
        expected = _TYPE_NAMES[base] + (" or null" if optional else "")
        raise ConfigError(f"model.{name}: got {value!r} ({type(value).__name__}), expected {expected}")


def load_model_config(values: Mapping[str, Any]) -> ModelConfig:
    """Build a ModelConfig from a plain mapping: the `model` group (resolved at the stage door), a
    checkpoint's hyperparameters or a Hugging Face config's translation.

    Unknown keys are rejected with the list of known ones; a `name` key (the preset's label) is ignored.
    """
    values = {k: v for k, v in dict(values).items() if k != "name"}
    known = {f.name for f in fields(ModelConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"model.{unknown[0]}: unknown field, expected one of: {', '.join(sorted(known))}")
    return ModelConfig(**values)


model_config = Group(ModelConfig, "model", parse=load_model_config, label="base")
