"""Defaults the data builders share with their commands' flags.

The command line reads them when it builds its parser, for every command, so this module imports
nothing: the builders themselves (`moot.training.mixing`, `moot.training.preferences`) load the
model layer.
"""

#: The share of rows (or preference pairs) in the eval split (`moot data mix`, `data preferences`).
DEFAULT_EVAL_FRACTION = 0.05
#: The least score margin of a scored preference pair, in its source's points.
DEFAULT_MIN_MARGIN = 2.0
