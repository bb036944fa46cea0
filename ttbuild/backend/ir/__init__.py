"""The TTGIR dialect model every analysis, pass and lowering rule imports: op names (ops), op traits (optraits), encodings, the tensor and memdesc types, and the typed builders that create ops."""
