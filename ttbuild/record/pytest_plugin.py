"""pytest plugin (`-p ttbuild.record.pytest_plugin`): TTBUILD_RECORD=DIR records the session's Triton compiles; TTBUILD_SERVE=ARTIFACTS serves a library.

Each xdist worker writes its own record file. The miss policy of serving is
$TTBUILD_SERVE_MISS (default error).
"""

from ttbuild.record.envstart import start_from_environment


def pytest_configure(config):
    start_from_environment()
