"""Notion's JSON as text a model reads: titles, property values, blocks as markdown-ish lines.

Pure. Notion describes everything as typed objects (`{"type": "paragraph", "paragraph": {...}}`);
each function here reads one kind and falls back to a short `[type]` marker for kinds it does not
know, so a new Notion block type never fails a call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

_UUID_HEX: Final = re.compile(r"([0-9a-fA-F]{32})$")


def notion_id(text: str) -> str | None:
    """The object id in `text`: an id (dashed or not) or a Notion URL ending in one; None if
    there is none. Dashed, as the API writes ids."""
    tail = text.strip().split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    found = _UUID_HEX.search(tail.replace("-", ""))
    if found is None:
        return None
    raw = found.group(1).lower()
    return f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}"


def rich_text(items: Any) -> str:
    """A rich-text array as plain text."""
    if not isinstance(items, Sequence) or isinstance(items, str):
        return ""
    return "".join(str(item.get("plain_text", "")) for item in items if isinstance(item, Mapping))


def title_of(obj: Mapping[str, Any]) -> str:
    """A page's title (its `title` property) or a database's / data source's `title`."""
    if "title" in obj and isinstance(obj["title"], list):
        return rich_text(obj["title"])
    properties = obj.get("properties")
    if isinstance(properties, Mapping):
        for prop in properties.values():
            if isinstance(prop, Mapping) and prop.get("type") == "title":
                return rich_text(prop.get("title"))
    return ""


def property_text(prop: Mapping[str, Any]) -> str:
    """One property value as text ("" when empty)."""
    kind = prop.get("type")
    value = prop.get(kind) if isinstance(kind, str) else None
    if value is None:
        return ""
    match kind:
        case "title" | "rich_text":
            return rich_text(value)
        case "select" | "status":
            return str(value.get("name", "")) if isinstance(value, Mapping) else ""
        case "multi_select":
            return ", ".join(str(v.get("name", "")) for v in value if isinstance(v, Mapping))
        case "checkbox":
            return "yes" if value else "no"
        case "date":
            return _date(value)
        case "people":
            return ", ".join(str(v.get("name") or v.get("id", "")) for v in value)
        case "relation":
            return ", ".join(str(v.get("id", "")) for v in value if isinstance(v, Mapping))
        case "files":
            return ", ".join(str(v.get("name", "")) for v in value if isinstance(v, Mapping))
        case "formula":
            inner = value.get("type") if isinstance(value, Mapping) else None
            shown = value.get(inner) if isinstance(inner, str) else None
            return _date(shown) if inner == "date" else ("" if shown is None else str(shown))
        case "unique_id":
            prefix = value.get("prefix")
            return f"{prefix}-{value.get('number')}" if prefix else str(value.get("number", ""))
        case "number" | "url" | "email" | "phone_number" | "created_time" | "last_edited_time":
            return str(value)
        case "created_by" | "last_edited_by":
            return (
                str(value.get("name") or value.get("id", "")) if isinstance(value, Mapping) else ""
            )
    return ""


def properties_text(obj: Mapping[str, Any]) -> dict[str, str]:
    """Every property of a page (a database row) as text, by name."""
    properties = obj.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {
        str(name): property_text(prop)
        for name, prop in properties.items()
        if isinstance(prop, Mapping)
    }


_PREFIX: Final = {
    "heading_1": "# ",
    "heading_2": "## ",
    "heading_3": "### ",
    "bulleted_list_item": "- ",
    "numbered_list_item": "1. ",
    "quote": "> ",
    "callout": "> ",
    "toggle": "",
    "paragraph": "",
}
_MEDIA: Final = frozenset({"image", "video", "file", "pdf", "audio"})


def block_line(block: Mapping[str, Any]) -> str:
    """One block as a line (or a fenced code block): its text with a markdown-like prefix."""
    kind = str(block.get("type", ""))
    body = block.get(kind)
    body = body if isinstance(body, Mapping) else {}
    if kind in _PREFIX:
        return _PREFIX[kind] + rich_text(body.get("rich_text"))
    if kind == "to_do":
        mark = "x" if body.get("checked") else " "
        return f"- [{mark}] {rich_text(body.get('rich_text'))}"
    if kind == "code":
        return f"```{body.get('language', '')}\n{rich_text(body.get('rich_text'))}\n```"
    if kind == "divider":
        return "---"
    if kind in ("child_page", "child_database"):
        return f"[{kind.removeprefix('child_').replace('_', ' ')}] {body.get('title', '')}"
    if kind == "table_row":
        cells = body.get("cells")
        return " | ".join(rich_text(cell) for cell in cells) if isinstance(cells, list) else ""
    if kind in ("bookmark", "embed", "link_preview"):
        return f"[{kind}] {body.get('url', '')}"
    if kind in _MEDIA:
        source = body.get(body.get("type", "")) if isinstance(body.get("type"), str) else None
        url = source.get("url", "") if isinstance(source, Mapping) else ""
        caption = rich_text(body.get("caption"))
        return f"[{kind}] {caption or url}".rstrip()
    return f"[{kind}]"


def _date(value: Any) -> str:
    if not isinstance(value, Mapping):
        return ""
    start, end = value.get("start") or "", value.get("end")
    return f"{start} → {end}" if end else str(start)
