"""The values inside one action tag, in the forms real models write them.

- `key: value` lines (a list's `- ` before the key is allowed): a value runs on over
  following lines until the next known key; it is kept as written unless quotes wrap all
  of it. Keys are matched in any case; a line with an unknown key before any known one is
  skipped (an unknown one later belongs to the value).
- A JSON object as the whole body, read tolerantly (trailing commas are dropped); an object
  wrapping one object under the tag's own name (`{"spawn_research": {...}}`) is unwrapped.
  Numbers keep their digits, a list of words is joined by spaces.
- XML attributes on the opening tag (`goal="..."`, `goal='...'`, `max_iterations=5`), with
  entities such as `&quot;` decoded.
A ``` fence around the body is taken off first. Only the keys the tag knows are kept; a body
that looks like JSON but cannot be read is a problem the person sees, said in one line.
"""

from __future__ import annotations

import html
import json
import re

# One attribute (its value up to 20,000 characters, so a stray quote cannot scan the reply).
ATTRIBUTES = r"""(?:\s+[A-Za-z_][\w.-]*\s*=\s*(?:"[^"]{0,20000}"|'[^']{0,20000}'|[^\s"'<>/=`]+))*"""
_ATTRIBUTE = re.compile(
    r"""([A-Za-z_][\w.-]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'<>/=`]+))""", re.DOTALL
)
_KEY_LINE = re.compile(r"^\s*(?:[-*]\s+)?([A-Za-z_]+)\s*:\s?(.*)$")
_FENCED = re.compile(r"^\s*```[\w+-]*[ \t]*\n(.*?)\n?[ \t]*```\s*$", re.DOTALL)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def read_attributes(source: str) -> dict[str, str]:
    """{key: value} of an opening tag's attributes, keys in lower case."""
    found = {}
    for match in _ATTRIBUTE.finditer(source or ""):
        value = next(v for v in match.groups()[1:] if v is not None)
        found.setdefault(match.group(1).lower(), html.unescape(value))
    return found


def read_body(known: tuple[str, ...], body: str) -> tuple[dict[str, str], str]:
    """({key: value} of the known keys in a tag's body, the problem or '')."""
    fenced = _FENCED.match(body)
    if fenced:
        body = fenced.group(1)
    if body.strip().startswith("{"):
        return _json_values(known, body.strip())
    return _key_lines(known, body), ""


def _unquoted(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        if value[0] not in inner:  # the quotes wrap all of it, not two quoted words
            return inner
    return value


def _key_lines(known: tuple[str, ...], body: str) -> dict[str, str]:
    values, current = {}, None
    for line in body.splitlines():
        match = _KEY_LINE.match(line)
        key = match.group(1).lower() if match else None
        if key in known:
            current = key
            values[key] = [match.group(2)]
        elif match and current is None:
            continue  # an unknown key before any known one: ignored
        elif current is not None:
            values[current].append(line)
    return {k: _unquoted("\n".join(v)) for k, v in values.items()}


def _json_values(known: tuple[str, ...], body: str) -> tuple[dict[str, str], str]:
    try:
        data = json.loads(_TRAILING_COMMA.sub(r"\1", body))
    except ValueError as error:
        reason = getattr(error, "msg", str(error))
        return {}, (
            f"its body looks like JSON but cannot be read ({reason}); expected a JSON object "
            "or `key: value` lines"
        )
    if isinstance(data, dict) and len(data) == 1:
        (inner,) = data.values()
        data = inner if isinstance(inner, dict) else data
    if not isinstance(data, dict):
        return {}, 'its JSON body is not an object; expected {"key": "value", ...}'
    values = {}
    for key, value in data.items():
        name = str(key).lower()
        if name in known and value is not None:
            values[name] = _as_text(value)
    return values, ""


def _as_text(value) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return " ".join(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return json.dumps(value)
    return str(value)
