"""Analyses of TTGIR the transforms and the lowering read (axis info, layout math over ttbuild.backend.ir's encodings, shared-memory allocation); an analysis never imports a transform."""
