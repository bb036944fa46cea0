"""Analyses of TTGIR the transforms and the lowering read (axis info, layouts, shared-memory allocation); an analysis never imports a transform."""
