"""`serve` collects the static files only when that would change what the web serves: a start
with nothing changed skips WhiteNoise's hashing and gzipping of every file; a changed, added or
missing file collects again, so the web never serves a stale asset."""

from __future__ import annotations

import json
import os

import pytest

from researchagent.static_collect import MANIFEST_NAME, collect_static


@pytest.fixture
def static_tree(settings, tmp_path):
    """One source folder as the only finder's, collected into a folder of the test's own."""
    source = tmp_path / "source"
    (source / "css").mkdir(parents=True)
    (source / "css" / "app.css").write_text("body { color: black; }\n" * 50)
    settings.STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder"]
    settings.STATICFILES_DIRS = [source]
    settings.STATIC_ROOT = tmp_path / "collected"
    settings.STORAGES = {  # what serve runs with (the tests' own default is the plain one)
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    return source, tmp_path / "collected"


def _served_name(root, name: str) -> str:
    return json.loads((root / MANIFEST_NAME).read_text())["paths"][name]


def test_a_second_start_with_nothing_changed_collects_nothing(static_tree):
    _, root = static_tree
    assert collect_static() is True
    hashed = root / _served_name(root, "css/app.css")
    assert hashed.is_file() and hashed.with_name(hashed.name + ".gz").is_file()
    before = hashed.stat().st_mtime_ns
    os.utime(hashed, ns=(before - 10**9, before - 10**9))  # a collect would write it again

    assert collect_static() is False
    assert hashed.stat().st_mtime_ns == before - 10**9


def test_a_changed_or_added_source_is_collected_again(static_tree):
    source, root = static_tree
    collect_static()
    old = _served_name(root, "css/app.css")

    (source / "css" / "app.css").write_text("body { color: navy; }\n")
    assert collect_static() is True
    new = _served_name(root, "css/app.css")
    assert new != old and (root / new).read_text() == "body { color: navy; }\n"

    (source / "js").mkdir()
    (source / "js" / "new.js").write_text("console.log('new');\n")
    assert collect_static() is True
    assert (root / _served_name(root, "js/new.js")).is_file()


def test_a_collected_file_gone_or_a_broken_manifest_collects_again(static_tree):
    _, root = static_tree
    collect_static()
    hashed = root / _served_name(root, "css/app.css")
    hashed.unlink()
    assert collect_static() is True
    assert hashed.is_file()

    (root / MANIFEST_NAME).write_text("{not json")
    assert collect_static() is True
    assert root / _served_name(root, "css/app.css") == hashed
