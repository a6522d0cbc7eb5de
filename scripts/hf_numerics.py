"""Largest differences between t5rank and the Hugging Face references in tests/golden/ (written by
scripts/make_hf_goldens.py with transformers + torch, float32). Needs no torch.

    .venv/bin/python scripts/hf_numerics.py
"""

import numpy as np
from t5rank.models.monot5 import monot5_score
from t5rank.models.network import T5
from t5rank.models.t5_weights.hf import load_hf_checkpoint
import json
for name in ("hf_v1_0", "hf_v1_1", "hf5_v1_0", "hf5_v1_1", "hf5_v1_1_untied"):
  d = f"tests/golden/{name}"
  with open(f"{d}/config.json") as f:
    version = json.load(f).get("transformers_version")
  config, params = load_hf_checkpoint(d)
  ref = np.load(f"{d}/reference.npz")
  logits = T5(config).apply({"params": params}, ref["input_ids"], ref["decoder_input_ids"])
  log_p, _ = monot5_score(params, ref["input_ids"], config=config, target_ids=(1176, 6136))
  print(name, f"(transformers {version}; tied {config.tie_embeddings}, scaled "
        f"{config.scale_decoder_outputs})", "max |logits| %.1f" % np.abs(ref["logits"]).max(),
        "max |logits diff| %.1e" % np.abs(np.asarray(logits) - ref["logits"]).max(),
        "max |log P(true) diff| %.1e" % np.abs(np.asarray(log_p) - ref["log_p_true"]).max())
