"""Headless Chromium for the tests that look at a page as a reader does (the report,
TensorBoard): the DOM after scripts ran, and screenshots kept under test-artifacts/."""

import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import ROOT

ARTIFACTS = os.path.join(ROOT, "test-artifacts")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Chromium (Debian package chromium; .ci/run installs it)")


def _flags(profile, budget_ms):
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}"]
    if budget_ms:  # let the page's scripts fetch and draw before the capture
        flags.append(f"--virtual-time-budget={budget_ms}")
    return flags


def dom(url, profile, size=(1280, 2400), budget_ms=0) -> str:
    """The page's DOM once loaded (and scripts ran for `budget_ms` of virtual time) in
    a window of `size` (pages such as TensorBoard's draw only what is in view)."""
    return subprocess.run([*_flags(profile, budget_ms), f"--window-size={size[0]},{size[1]}",
                           "--dump-dom", url], capture_output=True, text=True,
                          timeout=180).stdout


def screenshot(url, name, profile, size=(1280, 2400), budget_ms=0, region=None,
               attempts=1) -> str:
    """Saves test-artifacts/NAME and checks that something was drawn (in `region`,
    (top, bottom, left, right) in pixels, or the whole page); returns the path.

    Pages that fetch their data in real time (TensorBoard) may not have drawn when
    the virtual time runs out: such a capture is taken again, up to `attempts` times.
    """
    from PIL import Image

    os.makedirs(ARTIFACTS, exist_ok=True)
    path = os.path.join(ARTIFACTS, name)
    top, bottom, left, right = region or (0, size[1], 0, size[0])
    for attempt in range(attempts):
        subprocess.run([*_flags(f"{profile}-{attempt}", budget_ms), f"--screenshot={path}",
                        f"--window-size={size[0]},{size[1]}", url], capture_output=True,
                       timeout=180)
        pixels = np.asarray(Image.open(path).convert("L"), dtype="float32")
        assert pixels.shape == (size[1], size[0])
        if pixels[top:bottom, left:right].std() > 20:  # drawn, not blank
            return path
    raise AssertionError(f"{path}: nothing drawn after {attempts} attempt(s)")
