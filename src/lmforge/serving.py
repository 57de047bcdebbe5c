"""Our trained models as MLflow pyfunc models that predict on raw text (MLflow "models from code":
this file is the model's code, so nothing is unpickled when it loads).

`lmforge.tracking` logs a training stage's final model with this file as its code: the checkpoint (read with
`weights_only=True`) and its tokenizer are the model's artifacts. `mlflow.pyfunc.load_model(uri)`
then predicts on a DataFrame's column `text`, one output string per input:
- a decoder continues the text greedily (`max_new_tokens`, default 20);
- an encoder fills each `[MASK]` of the text with its most likely token and returns the text;
- an encoder-decoder trained on span corruption (T5) reads the text, whose `<extra_id_N>` mark
  dropped spans, and returns what it generates for them;
- one trained on sentence pairs (the translation model) translates the text, decoded as
  `translate_eval` decodes by default (beam 4, length penalty 0.6);
- a fine-tuning row's model reads the columns its task kind needs and returns the label, the tags or
  the answer (`lmforge.finetune.predict`).
What it does follows from the checkpoint: its task when it has one, else its training objective.
"""

from __future__ import annotations

import re
import sys

import mlflow
import torch

MARKERS = re.compile(r"(\[MASK\]|<extra_id_\d+>)")  # encoded as text by our tokenizers: mapped to ids here


def use_shipped_code(archive: str | None) -> None:
    """Import lmforge from the model's own copy (artifact `lmforge`, a zip of the package that
    logged it), unless this process has imported lmforge already (the process that logged it)."""
    if archive and "lmforge" not in sys.modules and archive not in sys.path:
        sys.path.insert(0, archive)


class TextModel(mlflow.pyfunc.PythonModel):
    def load_context(self, context):
        use_shipped_code(context.artifacts.get("lmforge"))
        from lmforge.tokenizer.specials import load_tokenizer, special_token_ids
        from lmforge.training.checkpoints import load_module, read_checkpoint

        path = context.artifacts["checkpoint"]
        self.tokenizer = load_tokenizer(context.artifacts["tokenizer"])
        self.finetuned = None
        if "task" in read_checkpoint(path)["hyper_parameters"]:  # a fine-tuning row's model
            from lmforge.finetune.predict import Predictor

            self.finetuned = Predictor(path, self.tokenizer)
            return
        module = load_module(path)
        self.model, self.kind = module.model.eval(), module.objective_config.kind.value
        self.specials = special_token_ids(self.tokenizer)

    def predict(
        self, context, model_input, params=None
    ):  # no type hints: MLflow would read a schema from them
        if self.finetuned is not None:
            rows = model_input.to_dict("records") if hasattr(model_input, "columns") else list(model_input)
            return self.finetuned.predict([row if isinstance(row, dict) else {"text": row} for row in rows])
        texts = model_input["text"].tolist() if hasattr(model_input, "columns") else list(model_input)
        params = params or {}
        new = int(params.get("max_new_tokens", 20))
        if self.kind == "seq2seq":
            return [self._translate(str(text)) for text in texts]
        family = self.model.config.family.value
        return [getattr(self, f"_{family}")(str(text), new) for text in texts]

    def _ids(self, text: str) -> list[int]:
        """Text to ids, each [MASK] or <extra_id_N> marker as its special id."""
        ids: list[int] = []
        for part in MARKERS.split(text):
            if MARKERS.fullmatch(part):
                special = self.tokenizer.token_to_id(part)
                if special is None:
                    raise ValueError(f"text: {part} is not a token of this model's tokenizer")
                ids.append(special)
            elif part.strip():
                ids.extend(self.tokenizer.encode(part, add_special_tokens=False).ids)
        return ids

    @torch.no_grad()
    def _decoder(self, text: str, new: int) -> str:
        from lmforge.model.generation import generate

        prompt = torch.tensor([[self.specials.bos, *self._ids(text)]])
        out = generate(self.model, prompt, max_new_tokens=new, temperature=0, eos_token_id=self.specials.eos,
                       pad_token_id=self.model.config.pad_token_id)  # fmt: skip
        return self.tokenizer.decode(out[0, prompt.shape[1] :].tolist())

    @torch.no_grad()
    def _encoder(self, text: str, new: int) -> str:
        ids = torch.tensor([[self.specials.cls, *self._ids(text), self.specials.sep]])
        masked = ids == self.specials.mask
        filled = torch.where(masked, self.model(ids).logits.argmax(-1), ids)
        return self.tokenizer.decode(filled[0, 1:-1].tolist())

    @torch.no_grad()
    def _encoder_decoder(self, text: str, new: int) -> str:
        from lmforge.model.generation import generate

        source = torch.tensor([[*self._ids(text), self.specials.eos]])
        pad = self.model.config.pad_token_id
        out = generate(self.model, source, max_new_tokens=new, temperature=0, eos_token_id=self.specials.eos,
                       pad_token_id=pad, decoder_start_token_id=pad)  # fmt: skip
        return (
            self.tokenizer.decode(out[0, 1:].tolist(), skip_special_tokens=False).replace("<pad>", "").strip()
        )

    @torch.no_grad()
    def _translate(self, text: str) -> str:
        """As `translate_eval` decodes with its defaults (beam 4, length penalty 0.6, length limits):
        the source and EOS in, EOS starts and ends the target."""
        from lmforge.translate.config import DecodeConfig
        from lmforge.translate.decode import translate_batch

        decode, eos = DecodeConfig(), self.specials.eos
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids[: self.model.config.max_seq_len - 1]
        source = torch.tensor([[*ids, eos]])
        out = translate_batch(self.model, source, torch.ones_like(source), bos=eos, eos=eos, pad=self.specials.pad,
                              beam_size=decode.beam_size, alpha=decode.length_penalty,
                              max_len_a=decode.max_len_a, max_len_b=decode.max_len_b)  # fmt: skip
        return self.tokenizer.decode(out[0]).strip()


mlflow.models.set_model(TextModel())
