"""The bottom layer, which every other layer uses.

Errors, the option vocabulary, input and output, manifests, progress, tables, the safe expression
parser, FLOP and parameter accounting and the learning-rate schedules.
"""
