"""Statistics with no fabricbench import below them: a figure's median and intervals (figures.py) and the
paired comparison of two figures with its verdict (comparison.py)."""
