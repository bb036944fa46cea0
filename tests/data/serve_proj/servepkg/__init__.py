"""A project of our own for the record -> build -> serve GPU test: kernels defined in place, launched through Triton's call forms (tests/gpu/test_gpu_serve.py)."""
