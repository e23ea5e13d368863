#!/usr/bin/env python3
"""A small third-party MCP server, written with the official MCP Python SDK: a
restaurant storeroom's stock and suppliers. Its tool names, descriptions and schemas
are its own, so it checks that maitred's offline model chooses and fills tools only
from what a server says about them.

    inventory_server.py --port 8090        # Streamable HTTP at http://127.0.0.1:8090/mcp

The data is fixed (no clock, no randomness), so answers can be checked exactly.
"""

from __future__ import annotations

import argparse
import re
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field


class StockItem(BaseModel):
    sku: str
    name: str
    category: str
    on_hand: int
    unit: str
    reorder_level: int
    unit_cost: float
    supplier: str
    expires_on: str | None


class StockPage(BaseModel):
    items: list[StockItem]
    total: int


class Supplier(BaseModel):
    name: str
    phone: str
    delivery_days: list[str]
    min_order: float


class Suppliers(BaseModel):
    suppliers: list[Supplier]


def _item(sku, name, category, on_hand, unit, reorder, cost, supplier, expires) -> StockItem:
    return StockItem(sku=sku, name=name, category=category, on_hand=on_hand, unit=unit,
                     reorder_level=reorder, unit_cost=cost, supplier=supplier, expires_on=expires)


STOCK = [
    _item("DRY-0042", "Arborio rice", "dry goods", 18, "kg", 10, 3.20, "Nordic Dry Goods", "2027-06-30"),
    _item("DRY-0057", "Flour type 00", "dry goods", 6, "kg", 15, 1.10, "Nordic Dry Goods", "2027-03-31"),
    _item("DRY-0061", "Extra virgin olive oil", "dry goods", 4, "litre", 6, 9.80, "Olivia Imports", "2027-09-30"),
    _item("DRY-0075", "Sea salt", "dry goods", 12, "kg", 3, 1.60, "Nordic Dry Goods", None),
    _item("DAI-0103", "Whole milk", "dairy", 24, "litre", 20, 1.05, "Fjord Dairy", "2026-11-29"),
    _item("DAI-0110", "Unsalted butter", "dairy", 9, "kg", 8, 8.40, "Fjord Dairy", "2026-12-12"),
    _item("DAI-0118", "Parmigiano Reggiano", "dairy", 3, "kg", 4, 24.50, "Olivia Imports", "2027-02-15"),
    _item("DAI-0121", "Double cream", "dairy", 7, "litre", 10, 4.30, "Fjord Dairy", "2026-11-27"),
    _item("PRO-0201", "Shallots", "produce", 5, "kg", 4, 3.90, "Green Acre Farm", "2026-12-05"),
    _item("PRO-0214", "Lemons", "produce", 40, "piece", 30, 0.35, "Green Acre Farm", "2026-12-08"),
    _item("PRO-0220", "Thyme", "produce", 2, "bunch", 5, 1.80, "Green Acre Farm", "2026-11-28"),
    _item("PRO-0233", "Potatoes", "produce", 55, "kg", 25, 0.90, "Green Acre Farm", "2027-01-10"),
    _item("MEA-0301", "Lamb rack", "meat", 8, "kg", 6, 28.00, "Holm Butchers", "2026-11-30"),
    _item("MEA-0305", "Duck breast", "meat", 11, "kg", 5, 19.50, "Holm Butchers", "2026-12-02"),
    _item("FSH-0402", "Salmon fillet", "fish", 6, "kg", 8, 21.00, "North Sea Fish", "2026-11-26"),
    _item("FSH-0410", "Langoustines", "fish", 2, "kg", 3, 46.00, "North Sea Fish", "2026-11-25"),
    _item("DRK-0501", "House red wine", "drinks", 36, "bottle", 24, 7.50, "Vinothek Berg", None),
    _item("DRK-0507", "Champagne brut", "drinks", 14, "bottle", 12, 31.00, "Vinothek Berg", None),
    _item("DRK-0512", "Sparkling water", "drinks", 96, "bottle", 48, 0.60, "Clear Springs", None),
    _item("DRK-0520", "Espresso beans", "drinks", 8, "kg", 5, 18.90, "Roast & Co", "2027-04-30"),
    _item("CLN-0601", "Dish soap", "cleaning", 3, "litre", 5, 2.70, "CleanPro", None),
    _item("CLN-0604", "Paper napkins", "cleaning", 400, "piece", 300, 0.12, "CleanPro", None),
]

SUPPLIERS = [
    Supplier(name="Nordic Dry Goods", phone="+4570201010", delivery_days=["Mon", "Thu"], min_order=150),
    Supplier(name="Fjord Dairy", phone="+4570202020", delivery_days=["Mon", "Wed", "Fri"], min_order=80),
    Supplier(name="Olivia Imports", phone="+4570203030", delivery_days=["Tue"], min_order=300),
    Supplier(name="Green Acre Farm", phone="+4570204040", delivery_days=["Tue", "Fri"], min_order=60),
    Supplier(name="Holm Butchers", phone="+4570205050", delivery_days=["Wed", "Sat"], min_order=200),
    Supplier(name="North Sea Fish", phone="+4570206060", delivery_days=["Tue", "Thu", "Sat"], min_order=120),
    Supplier(name="Vinothek Berg", phone="+4570207070", delivery_days=["Thu"], min_order=250),
    Supplier(name="Clear Springs", phone="+4570208080", delivery_days=["Mon"], min_order=50),
    Supplier(name="Roast & Co", phone="+4570209090", delivery_days=["Fri"], min_order=100),
    Supplier(name="CleanPro", phone="+4570201111", delivery_days=["Wed"], min_order=75),
]

FIELDS = {
    "sku": str, "name": str, "category": str, "on_hand": int, "unit": str,
    "reorder_level": int, "unit_cost": float, "supplier": str, "expires_on": "date",
}

# `field op value`, where value is quoted text (a quote doubled inside) or a number.
CONDITION = re.compile(
    r"\s*(?P<field>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op><=|>=|!=|=|<|>)\s*"
    r"(?P<value>'(?:[^']|'')*'|-?\d+(?:\.\d+)?)\s*"
)
JOIN = re.compile(r"and\b\s*", re.IGNORECASE)
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_filter(text: str) -> list[tuple[str, str, Any]]:
    """The conditions of a filter; a ToolError names what is wrong with it."""
    conditions = []
    at = 0
    while True:
        match = CONDITION.match(text, at)
        if not match:
            raise ToolError(
                f"cannot read the filter at character {at}: write conditions like "
                "on_hand < 10 and category = 'dairy'"
            )
        field, op, raw = match.group("field", "op", "value")
        if field not in FIELDS:
            raise ToolError(f"unknown field {field!r}; the fields are {', '.join(FIELDS)}")
        kind = FIELDS[field]
        if raw.startswith("'"):
            value: Any = raw[1:-1].replace("''", "'")
            if kind in (int, float):
                raise ToolError(f"{field} is a number: write it without quotes")
            if kind == "date" and not DATE.match(value):
                raise ToolError(f"{field} is a date: write it as 'YYYY-MM-DD'")
        else:
            if kind not in (int, float):
                raise ToolError(f"{field} takes quoted text, e.g. {field} = 'abc'")
            value = float(raw)
        conditions.append((field, op, value))
        at = match.end()
        if at >= len(text.rstrip()):
            return conditions
        joined = JOIN.match(text, at)
        if not joined:
            raise ToolError(f"expected 'and' at character {at}")
        at = joined.end()


def holds(item: StockItem, field: str, op: str, wanted: Any) -> bool:
    value = getattr(item, field)
    if value is None:
        return False
    if isinstance(value, str):
        value, wanted = value.lower(), str(wanted).lower()
    return {
        "=": value == wanted, "!=": value != wanted, "<": value < wanted,
        "<=": value <= wanted, ">": value > wanted, ">=": value >= wanted,
    }[op]


server = MCPServer("storeroom", title="Storeroom inventory", version="1.0.0")

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


@server.tool(
    title="Browse stock items",
    annotations=READ_ONLY,
    description=(
        "Browse the storeroom's stock items (ingredients, drinks and supplies): how many "
        "units are on hand, the reorder level, the unit cost in euros, the supplier and "
        "the expiry date. The result's `total` counts every matching item. Narrow it with "
        "`filter`: conditions `field op value` joined by `and`, op one of = != < <= > >=; "
        "text and dates in single quotes (dates as 'YYYY-MM-DD'), numbers bare, e.g. "
        "`on_hand < 10 and category = 'dairy'`. Fields: `sku` text, `name` text, `category` "
        "text, `on_hand` integer, `unit` text, `reorder_level` integer, `unit_cost` number, "
        "`supplier` text, `expires_on` date. Order with `sort`: a field for the smallest "
        "first, or a field after a minus sign for the largest first, e.g. `-unit_cost`."
    ),
)
def list_stock_items(
    filter: Annotated[str | None, Field(description="Conditions the items must meet, e.g. `on_hand < 10`.")] = None,
    sort: Annotated[str | None, Field(description="A field, or `-field` for largest first.")] = None,
    limit: Annotated[int | None, Field(description="How many items to return, 1 to 50 (default 50).", ge=1, le=50)] = None,
) -> StockPage:
    items = list(STOCK)
    if filter and filter.strip():
        conditions = parse_filter(filter.strip())
        items = [i for i in items if all(holds(i, *c) for c in conditions)]
    if sort and sort.strip():
        field = sort.strip().lstrip("-")
        if field not in FIELDS:
            raise ToolError(f"cannot sort by {field!r}; the fields are {', '.join(FIELDS)}")
        present = [i for i in items if getattr(i, field) is not None]
        absent = [i for i in items if getattr(i, field) is None]
        present.sort(key=lambda i: getattr(i, field), reverse=sort.strip().startswith("-"))
        items = present + absent
    return StockPage(items=items[: limit or 50], total=len(items))


@server.tool(
    title="Stock item details",
    annotations=READ_ONLY,
    description=(
        "Look up one stock item by its SKU (e.g. `DRY-0042`): what it is, how many units "
        "are on hand, its reorder level, unit cost, supplier and expiry date."
    ),
)
def get_stock_item(
    sku: Annotated[str, Field(description="The item's SKU, like `DRY-0042`.")],
) -> StockItem:
    for item in STOCK:
        if item.sku.lower() == sku.strip().lower():
            return item
    raise ToolError(f"no stock item has SKU {sku!r}; list_stock_items lists them")


@server.tool(
    title="Suppliers",
    annotations=READ_ONLY,
    description=(
        "The storeroom's suppliers: their phone number, the weekdays they deliver on and "
        "the smallest order they take, in euros."
    ),
)
def list_suppliers() -> Suppliers:
    return Suppliers(suppliers=SUPPLIERS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    args = parser.parse_args()
    server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
