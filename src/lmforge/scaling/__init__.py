"""Scaling-law sweeps: the grid, the cells, the fits and the plots."""
