"""The container images of the tests that run programs in an image
(deploy/containers/build-images.sh), and the order that lets them be built
while the other tests run.

TFSLURM_IMAGES names the images' directory when it is already made
(tests/containers.sh prints it; tests/compat.sh sets it). tests/run.sh
builds the images in its background chain while the integration session
runs instead (tests/lib/background.sh), and names the file the build writes
when it ends: TFSLURM_IMAGES_FROM, which holds the directory, or a line
starting "failed" and saying where the build's log is. The tests that need
the images carry the mark `images` and run last in the session
(conftest.py, pytest_collection_modifyitems), so that they are the ones
that might wait, and only at the end.
"""
import os
import time

import pytest

# How long a test waits for the images' build before failing: on a new
# machine the build took 6:59 in the idle class, and the first test that
# needs it started about 30 minutes into the integration session (docs/
# contributing.md, "What CI costs", 2426beb); the bound leaves room for a
# slower disk or mirror.
IMAGES_WAIT_SECONDS = 45 * 60


def container_images():
    """The images' directory, waiting for tests/run.sh's build if need be;
    fails the test, saying why, when there are none."""
    d = os.environ.get("TFSLURM_IMAGES")
    pending = os.environ.get("TFSLURM_IMAGES_FROM")
    if not d and pending:
        deadline = time.monotonic() + IMAGES_WAIT_SECONDS
        while not os.path.exists(pending):
            if time.monotonic() > deadline:
                pytest.fail(f"the container images' build did not end within {IMAGES_WAIT_SECONDS} s "
                            f"({pending} was never written)")
            time.sleep(2)  # a file another process writes: nothing here to wait on but its presence
        d = open(pending).read().strip()
        if d.startswith("failed"):
            pytest.fail(f"the container images could not be built: {d}")
    if not d or not os.path.exists(os.path.join(d, "tf.sqsh")):
        pytest.fail("no container images: run deploy/containers/build-images.sh (tests/containers.sh "
                    "does) and set TFSLURM_IMAGES to the directory it prints")
    return d


def images_last(items):
    """items with the tests marked `images` moved to the end, each group in
    its own order (a module's tests stay together within their group)."""
    needs = [item for item in items if item.get_closest_marker("images")]
    return [item for item in items if not item.get_closest_marker("images")] + needs
