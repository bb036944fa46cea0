"""Which image of a variant a device loads (exact SASS, else PTX the driver compiles), and its bytes, checked against the sha256 its metadata recorded."""

from __future__ import annotations

import hashlib  # stdlib: the runtime installs without the compiler's xxhash
import os

from ..driver import CudaError
from ..metadata import MetadataError, Variant, best_image
from .common import LaunchError


def image_for(variant: Variant, capability):
    """The image of `variant` to load on compute `capability` ((major, minor), or None when
    the driver cannot say: the variant's own cubin). Raises LaunchError when no image runs
    there."""
    if capability is None:
        return next((i for i in variant.images if i.path == variant.cubin_path), variant.images[0])
    image = best_image(variant.images, capability)
    if image is None:  # selection rejects such variants first; a forced one still says why
        raise LaunchError(f"{variant.variant}: holds {variant.holds()}; nothing runs on compute capability "
                          f"{capability[0]}.{capability[1]}")
    return image


def check_driver(driver, variant: Variant, image) -> None:
    """Raise CudaError (CUDA_ERROR_INSUFFICIENT_DRIVER) when `driver` supports a CUDA older
    than `variant`'s minimum (its PTX ISA's); a driver that cannot say passes."""
    version_of = getattr(driver, "driver_version", None)
    if version_of is None:
        return
    have = version_of()
    if have < variant.min_cuda_driver:
        from ...target import cuda_version_text

        raise CudaError("loading " + image.describe(), "CUDA_ERROR_INSUFFICIENT_DRIVER",
                        f"{variant.variant} needs a driver for {variant.driver_text()} "
                        f"or newer; this driver supports CUDA {cuda_version_text(have)}: update "
                        "the NVIDIA driver")


def read_image(variant: Variant, image) -> bytes:
    """The image's bytes, checked against the sha256 its metadata recorded: a cubin from
    another build (a kill between the two writes, a copy over a library) is refused with
    the file's name instead of launching a kernel the metadata does not describe. PTX gets
    the NUL that cuModuleLoadData needs. Raises MetadataError on a missing digest, a link
    out of the library's folder, or a mismatch."""
    # Always checked (issue 32 item 3): metadata without a digest would hand whatever the
    # file holds to the driver, and a link could name any file of the machine.
    if not (isinstance(image.sha256, str) and len(image.sha256) == 64):
        raise MetadataError(f"{variant.json_path} records no sha256 for {os.path.basename(image.path)} "
                            "(cubin_sha256): refused; rebuild the library")
    lib = os.path.realpath(os.path.dirname(variant.json_path))
    real = os.path.realpath(image.path)
    if os.path.dirname(real) != lib:
        raise MetadataError(f"{image.path} is a link to {real}, outside the library {lib}: refused")
    with open(real, "rb") as f:
        data = f.read()
    got = hashlib.sha256(data).hexdigest()
    if got != image.sha256:
        raise MetadataError(f"{image.path} is not the file {variant.json_path} describes "
                            f"(sha256 {got[:16]}..., metadata {image.sha256[:16]}...): rebuild the library")
    if image.kind == "ptx" and not data.endswith(b"\0"):
        data += b"\0"  # cuModuleLoadData reads PTX as a NUL-terminated string
    return data
