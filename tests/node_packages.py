"""The npm packages the Node.js clients in the tests use (a test helper): the official ACP
TypeScript SDK, current and 1.x, and acpx, pinned in tests/interop/ts/package.json with its
lockfile and installed with `npm install` into tests/interop/ts/node_modules (ignored by git) when
what is there is not what the lockfile says.

Without Node.js and npm on PATH the tests that need them are skipped, saying so; in CI that is a
failure (`unavailable`), since `.ci/run` installs both.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from unavailable import unavailable

PACKAGES = Path(__file__).resolve().parent / "interop" / "ts"
CURRENT_SDK = "@agentclientprotocol/sdk"
"""The SDK's current release, with the app API (`client()`)."""
SDK_1 = "acp-sdk-1"
"""The last 1.x release of the SDK, with `ClientSideConnection`, under an npm alias."""


def locked_version(package: str) -> str:
    """The version of `package` (a name under node_modules) the lockfile pins."""
    lock = json.loads((PACKAGES / "package-lock.json").read_text(encoding="utf-8"))
    return str(lock["packages"][f"node_modules/{package}"]["version"])


def installed_version(package: str) -> str | None:
    manifest = PACKAGES / "node_modules" / package / "package.json"
    if not manifest.is_file():
        return None
    return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])


def node_with_packages(needs: str) -> str:
    """The `node` executable, with the locked packages installed in `PACKAGES`; `needs` names
    the test's use of them in the reason it is skipped without Node.js."""
    node = install_packages()
    if node is None:
        unavailable(f"Node.js and npm are not on PATH: {needs} needs them (CI has them)")
    return node


def install_packages() -> str | None:
    """Install the locked packages in `PACKAGES` unless they are there already; the `node`
    executable, or None without Node.js and npm. `conftest.py` calls it once before the tests
    run, so that no test of the fast tier starts npm (the first run takes a few seconds)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None
    pinned = (CURRENT_SDK, SDK_1, "acpx")
    if any(installed_version(name) != locked_version(name) for name in pinned):
        install = subprocess.run(
            # `npm install` from the lockfile, not `npm ci`: the lockfile cannot list the
            # optional per-platform builds of a dependency that a registry mirror lacks, and
            # `npm ci` refuses a lockfile without them. `--no-save` leaves the lockfile as it is.
            [npm, "install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error"],
            check=False,
            cwd=PACKAGES,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert install.returncode == 0, (
            f"npm install failed in {PACKAGES}:\n{install.stdout}\n{install.stderr}"
        )
        assert [installed_version(name) for name in pinned] == [
            locked_version(name) for name in pinned
        ]
    return node
