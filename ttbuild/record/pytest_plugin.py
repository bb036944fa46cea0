"""pytest plugin (`-p ttbuild.record.pytest_plugin`): TTBUILD_RECORD=DIR records the session's Triton compiles; TTBUILD_SERVE=ARTIFACTS serves a library.

Each xdist worker writes its own record file. The miss policy of serving is
$TTBUILD_SERVE_MISS (default error).
"""

import os


def pytest_configure(config):
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
