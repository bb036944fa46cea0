"""What the startup hook and the pytest plugin both do at start: serve ($TTBUILD_SERVE) and record ($TTBUILD_RECORD) as the environment asks."""

import os


def start_from_environment() -> None:
    """TTBUILD_SERVE=ARTIFACTS: serve that library (miss policy $TTBUILD_SERVE_MISS, default error;
    TTBUILD_SERVE_FACADE=1 for the triton façade). TTBUILD_RECORD=DIR: record Triton's compiles into
    DIR once the process imports triton (ttbuild.record.hook)."""
    library = os.environ.get("TTBUILD_SERVE")
    if library:
        from ttbuild.runtime.serve import serve

        serve(library, miss=os.environ.get("TTBUILD_SERVE_MISS", "error"), facade=os.environ.get("TTBUILD_SERVE_FACADE") == "1")
    directory = os.environ.get("TTBUILD_RECORD")
    if directory:
        from ttbuild.postimport import when_imported

        def on_triton(_module):
            from ttbuild.record.hook import install

            install(directory)

        when_imported("triton", on_triton)
