"""Pure analysis of stored runs: compare two runs, gate a release, find change points, A/B blocks.

Everything here takes records or arrays and returns numbers: no I/O, no clock. Randomness
(bootstrap, permutations) comes from seeded generators, so a result can be reproduced exactly.
"""
