"""collectstatic for `serve`, skipped when nothing it would collect has changed.

WhiteNoise's storage hashes and gzips every file again on each collectstatic, changed or not:
~2 CPU-s and as many seconds of every `make run` start before the web answers. The sources
(each finder's files: the apps', the vendored ones, ninja's) are fingerprinted by path, size
and modification time, with the storage and URL settings that shape the output; the
fingerprint of the last collect is kept beside its manifest. A collect runs again when the
fingerprint differs, the manifest is gone, or a file the manifest names is missing."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles.finders import get_finders
from django.core.management import call_command

STAMP_NAME = ".agentsys-collected"
MANIFEST_NAME = "staticfiles.json"  # ManifestStaticFilesStorage's default manifest_name


def collect_static() -> bool:
    """Collect the static files unless the last collect is still current; True if it ran."""
    root = Path(settings.STATIC_ROOT)
    fingerprint = sources_fingerprint()
    if _current(root, fingerprint):
        return False
    call_command("collectstatic", interactive=False, verbosity=0)
    (root / STAMP_NAME).write_text(fingerprint + "\n")
    return True


def sources_fingerprint() -> str:
    digest = hashlib.sha256()
    shaping = (settings.STATIC_URL, settings.STORAGES["staticfiles"])
    digest.update(json.dumps(shaping, sort_keys=True, default=str).encode())
    entries = []
    for finder in get_finders():
        for path, storage in finder.list(["CVS", ".*", "*~"]):  # collectstatic's own ignores
            stat = os.stat(storage.path(path))
            prefix = getattr(storage, "prefix", None) or ""
            entries.append(f"{prefix}/{path}\0{stat.st_size}\0{stat.st_mtime_ns}")
    for entry in sorted(entries):
        digest.update(entry.encode() + b"\n")
    return digest.hexdigest()


def _current(root: Path, fingerprint: str) -> bool:
    try:
        if (root / STAMP_NAME).read_text().strip() != fingerprint:
            return False
        manifest = json.loads((root / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return False
    paths = manifest.get("paths") if isinstance(manifest, dict) else None
    if not isinstance(paths, dict):
        return False
    return all((root / hashed).is_file() for hashed in paths.values())
