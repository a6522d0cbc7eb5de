"""Checkpoints as files, for any model: where a name (a path, `shipped:NAME`, a Hugging Face Hub id)
becomes a local directory, which format it holds, and t5rank's own format.

    checkpoint = resolve("shipped:monot5")     # resolved.py: path, format, metadata, read once
    detect_format(path)                        # formats.py: one of FORMATS
    native.save_checkpoint(directory, params, config)   # native.py: Orbax + config.json

| module | what |
| --- | --- |
| `locate.py` | a name -> a local path (`shipped:`, Hub ids, the Hugging Face cache) |
| `resolved.py` | a `Checkpoint`: the path, its format and the small JSON files that say what it is |
| `formats.py` | `FORMATS`, `detect_format`, the files of each format, a Hugging Face directory's raw tensors |
| `native.py` | t5rank's Orbax directory: parameters, config.json, metadata.json, manifest.json |
| `torch_pickle.py` | PyTorch `.bin` state dicts (zip and legacy layouts) read without torch |
| `restricted_pickle.py` | their pickle, read without `pickle`: nothing runs, memory and time bounded |
| `untrusted.py` | values from a stranger's file quoted safely in a message |
| `shipped.py` | the models shipped inside the package |
| `tree.py` | nested parameters and their flat names, `CheckpointError`, atomic writes |

This layer imports nothing from `t5rank.models`: what the tensors mean is the model's to say, and
each model's loader, beside it, imports the readers here (T5's, in every format:
`t5rank.models.t5_weights`; the other families: `t5rank.models.loading`).
"""

from t5rank.checkpoints.formats import FORMATS, detect_format
from t5rank.checkpoints.tree import CheckpointError

__all__ = ["CheckpointError", "FORMATS", "detect_format"]
