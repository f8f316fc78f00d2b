"""A faithful small re-implementation of the original memory store, for
comparison only: one JSON file per entry under {root}/{project}/{agent_id}/, named
{timestamp_ms}_{type}_{key}.json and written atomically (.tmp then rename); a query scans
the directories, filters on the file name first (type, time), then reads each remaining
file for the scope, target and tag filters. Context assembly follows the same steps as
memory_app.context, on top of that query."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentsys.context import render_sections
from agentsys.memory import ContextLimits, Entry
from memory_app.context import widening_levels


class FileStore:
    def __init__(self, root: Path):
        self.root = Path(root)

    def write(self, entry: dict) -> None:
        folder = self.root / entry["project"] / (entry["agent_id"] or "_")
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / ".meta.json").write_text(json.dumps({"agent_id": entry["agent_id"]}))
        name = f"{int(entry['created_at'] * 1000):013d}_{entry['type']}_{entry['key']}.json"
        tmp = folder / (name + ".tmp")
        tmp.write_text(json.dumps(entry))
        os.replace(tmp, folder / name)

    def query(
        self,
        *,
        project: str,
        agent_id: str | None = None,
        exclude_agent: str | None = None,
        types: tuple[str, ...] = (),
        type_not: tuple[str, ...] = (),
        limit: int | None = None,
        newest_first: bool = True,
        **match,
    ) -> list[dict]:
        """`match`: session, sweep, run, target_id, active (read from each file)."""
        base = self.root / project
        folders = [base / agent_id] if agent_id else _subfolders(base)
        candidates = []
        for folder in folders:  # phase 1: file names only
            if exclude_agent and folder.name == exclude_agent:
                continue
            for name in _names(folder):
                if not name.endswith(".json") or name == ".meta.json":
                    continue
                stamp, rest = name.split("_", 1)
                kind = rest[: rest.rindex("_")]
                if (types and kind not in types) or kind in type_not:
                    continue
                candidates.append((stamp, folder / name))
        candidates.sort(reverse=newest_first)
        found = []
        for _, path in candidates:  # phase 2: read each remaining file
            entry = json.loads(path.read_text())
            if all(entry.get(k) == v for k, v in match.items()):
                found.append(entry)
                if limit is not None and len(found) >= limit:
                    break
        return found

    def assemble_context(self, *, agent_id: str, scope: dict, token_budget: int) -> str:
        limits = ContextLimits()
        own = self.query(
            project=scope["project"],
            agent_id=agent_id,
            type_not=("raw_file",),
            newest_first=False,
            active=True,
            limit=limits.own,
        )
        inbox = self.query(
            project=scope["project"],
            types=("message",),
            target_id=agent_id,
            acked=False,
            active=True,
            newest_first=False,
            limit=limits.inbox,
        )
        sections = [("My Entries", own), ("Inbox", inbox)]
        shown: set[str] = set()
        for title, field, limit in widening_levels(scope, limits):
            rows = self.query(
                project=scope["project"],
                exclude_agent=agent_id,
                types=tuple(limits.level_types),
                active=True,
                limit=limit + len(shown),
                **({field: scope[field]} if field != "project" else {}),
            )
            fresh = [r for r in rows if r["key"] not in shown][:limit]
            shown.update(r["key"] for r in fresh)
            sections.append((title, fresh))
        return render_sections(
            [(title, [_entry(r) for r in rows]) for title, rows in sections], token_budget
        )


def _subfolders(base: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(base) if e.is_dir()]
    except FileNotFoundError:
        return []


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []


def _entry(row: dict) -> Entry:
    from datetime import UTC, datetime

    return Entry(
        key=row["key"],
        type=row["type"],
        agent_id=row["agent_id"],
        project=row["project"],
        data=row["data"],
        created_at=datetime.fromtimestamp(row["created_at"], UTC),
        target_id=row["target_id"],
        session=row["session"],
        sweep=row["sweep"],
        run=row["run"],
        role=row["role"],
        tags=tuple(row["tags"]),
    )
