"""t5rank: monoT5 sequence-to-sequence document ranking in JAX.

Where things are: the network `t5rank.network`, the score `t5rank.score`, the input template
`t5rank.inputs`, vocabulary and target words `t5rank.vocab`, checkpoint formats `t5rank.checkpoints`,
the command line `t5rank.cli`.
"""

__version__ = "0.1.0"
