"""Issue 28's architecture experiments at equal compute: positions that extrapolate (or not), GQA/MQA's
KV-cache saving, the KV cache's decoding speed and LayerNorm against RMSNorm. The decoders are trained
by the pretrain stage (pipelines/experiments/dvc.yaml: arch_pretrain); `stage.run` measures them."""
