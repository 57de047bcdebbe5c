"""Our trained models as Hugging Face folders: `export_pretrained` (lmforge.export.hf) and the
`export` stage (lmforge.export.stage), which writes one folder per pretrained family and checks it
against `transformers`."""

from lmforge.export.hf import EXPORTERS, export_pretrained, exporter_for

__all__ = ["EXPORTERS", "export_pretrained", "exporter_for"]
