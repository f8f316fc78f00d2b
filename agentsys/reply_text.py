"""The part of a model's answer that is meant, not quoted: `outside_code(text)` returns the
text with quoted parts blanked (replaced by spaces, newlines kept), so every position in it is
the same position in the original and a tag found there can be cut from the original.

The rules (the research loop's reply reader and the chat's action tags both use them):

- Inline code (`` `...` ``, with any number of backticks, on one line) is quoted: "I will
  answer with `<promise>DONE</promise>`" names the tag, it does not use it.
- A fenced block (``` or ~~~ at the start of a line) is quoted, with two exceptions that are
  unwrapped (the fence lines are blanked, what is between them is read as answer text):
  a fence whose info string says it holds a document (markdown, md, xml, html, text, txt,
  plaintext), and a fence that holds the whole answer (nothing but space outside it). Real
  models wrap a whole answer in ```markdown; a ```yaml or ``` block after the answer is a
  format reminder or an example.
- A fence that is never closed is not quoted (only its opening line is blanked): a reply cut
  off inside one, or a block that forgot its closing fence, keeps its tags.
- A reasoning part (`<think>`, `<thinking>`, `<reasoning>` … its closing tag) is blanked: a
  model thinks about the tags it will write before writing them. A closing `</think>` with no
  opening one (a template that opened it in the prompt) blanks everything before it.
"""

from __future__ import annotations

import re

DOCUMENT_FENCES = {"markdown", "md", "xml", "html", "text", "txt", "plaintext"}
_FENCE_OPEN = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})[ \t]*([^`\n]*?)[ \t]*$", re.MULTILINE)
_INLINE = re.compile(r"(`+)(?!`)[^\n]*?(?<!`)\1(?!`)")
_REASONING_OPEN = re.compile(r"<\s*(?:think|thinking|reasoning)\s*>", re.IGNORECASE)
_REASONING_CLOSE = re.compile(r"<\s*/\s*(think|thinking|reasoning)\s*>", re.IGNORECASE)


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _fences(text: str) -> list[tuple[int, int, int, int, str]]:
    """(start, content start, content end, end, info) of each closed fenced block."""
    found, position = [], 0
    while opening := _FENCE_OPEN.search(text, position):
        mark = opening.group(1)
        closing = re.compile(rf"^[ \t]{{0,3}}{mark[0]}{{{len(mark)},}}[ \t]*$", re.MULTILINE)
        close = closing.search(text, opening.end() + 1)
        if close is None:
            found.append((opening.start(), opening.end(), len(text), len(text), "\0unclosed"))
            break
        info = (opening.group(2).split() or [""])[0].lower()
        found.append((opening.start(), opening.end(), close.start(), close.end(), info))
        position = close.end()
    return found


def without_reasoning(text: str) -> str:
    """`text` with its reasoning parts blanked (same length). Linear: each opening tag is
    matched with the next closing one, and the search stops where none is left."""
    pieces, position = [], 0
    while opening := _REASONING_OPEN.search(text, position):
        closing = _REASONING_CLOSE.search(text, opening.end())
        if closing is None:
            break
        pieces += [text[position : opening.start()], _blank(text[opening.start() : closing.end()])]
        position = closing.end()
    text = "".join(pieces) + text[position:]
    closes = list(_REASONING_CLOSE.finditer(text))
    if closes:  # a closing tag left over: its opening one was in the prompt
        last = closes[-1]
        text = _blank(text[: last.end()]) + text[last.end() :]
    return text


def outside_code(text: str) -> str:
    """`text` with its quoted parts blanked (see the module's rules); same length."""
    text = without_reasoning(text)
    pieces, position = [], 0
    for start, inner, inner_end, end, info in _fences(text):
        whole = not text[:start].strip() and not text[end:].strip()
        pieces.append(_blank_inline(text[position:start]))
        if info == "\0unclosed":
            pieces.append(_blank(text[start:inner]) + _blank_inline(text[inner:end]))
        elif whole or info in DOCUMENT_FENCES:
            inside = _blank_inline(text[inner:inner_end])
            pieces.append(_blank(text[start:inner]) + inside + _blank(text[inner_end:end]))
        else:
            pieces.append(_blank(text[start:end]))
        position = end
    pieces.append(_blank_inline(text[position:]))
    return "".join(pieces)


def _blank_inline(text: str) -> str:
    return _INLINE.sub(lambda m: _blank(m.group(0)), text)
