"""Varnish (VCL), as verify reads and runs it."""
