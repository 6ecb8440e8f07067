"""The two tools of envs/tau2_retail.yaml that swap items of an order, written from the retail
policy (envs/data/tau2_retail/policy.md): each is ``fn(db, **args)``, where ``db`` is the
episode's copy of the shop's database (``users``, ``orders``, ``products``). The other
fourteen tools are declared in the YAML (``type: state`` steps).

A swap pairs each old item with the first copy in the order not yet taken (an item listed
twice needs two copies), checks each new item is another available variant of the same
product and totals the price difference: positional matching that the declarative steps do
not express. A request the policy does not allow raises ``ToolError``: the agent reads the
message and nothing changes.
"""

from __future__ import annotations

from typing import Any

from envbuilder.errors import ToolError

def _order(db: Any, order_id: str) -> dict[str, Any]:
    if order_id not in db["orders"]:
        raise ToolError("Order not found")
    order: dict[str, Any] = db["orders"][order_id]
    return order


def _user(db: Any, user_id: str) -> dict[str, Any]:
    if user_id not in db["users"]:
        raise ToolError("User not found")
    user: dict[str, Any] = db["users"][user_id]
    return user


def _payment_method(user: dict[str, Any], payment_method_id: str) -> dict[str, Any]:
    method = user["payment_methods"].get(payment_method_id)
    if method is None:
        raise ToolError("Payment method not found")
    return dict(method)


def _variant(db: Any, item_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The product and the variant of ``item_id``."""
    for product_id in db["products"]:
        product = db["products"].peek(product_id)
        if item_id in product["variants"]:
            return product, product["variants"][item_id]
    raise ToolError(f"Item {item_id} not found")


def _positions(order: dict[str, Any], item_ids: list[str]) -> list[int]:
    """The positions in ``order`` of ``item_ids`` (an item listed twice needs two copies)."""
    taken: list[int] = []
    for item_id in item_ids:
        found = next(
            (i for i, it in enumerate(order["items"]) if it["item_id"] == item_id and i not in taken), None
        )
        if found is None:
            raise ToolError(f"{item_id} not found in the order (or listed more times than ordered)")
        taken.append(found)
    return taken


def _swaps(db: Any, order: dict[str, Any], item_ids: list[str], new_item_ids: list[str]) -> float:
    """Check each old item can become its new item; the price difference to pay."""
    if not item_ids:
        raise ToolError("No items given")
    if len(item_ids) != len(new_item_ids):
        raise ToolError("The number of items to be exchanged should match")
    difference = 0.0
    for i, new_id in zip(_positions(order, item_ids), new_item_ids, strict=True):
        old = order["items"][i]
        product, variant = _variant(db, new_id)
        if product["product_id"] != old["product_id"]:
            raise ToolError(f"New item {new_id} is not the same product as {old['item_id']}")
        if not variant["available"]:
            raise ToolError(f"New item {new_id} is not available")
        difference += variant["price"] - old["price"]
    return round(difference, 2)


def _charge(user: dict[str, Any], method_id: str, amount: float) -> None:
    """Take ``amount`` (negative: a refund) from a gift card's balance; other methods need no
    book-keeping here."""
    method = user["payment_methods"][method_id]
    if method["source"] != "gift_card":
        return
    if amount > method["balance"]:
        raise ToolError("Insufficient gift card balance to pay for the price difference")
    method["balance"] = round(method["balance"] - amount, 2)


def _pending(order: dict[str, Any]) -> None:
    if order["status"] != "pending":
        raise ToolError("Non-pending order cannot be modified")


def modify_pending_order_items(
    db: Any, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> dict[str, Any]:
    """Change items of a pending order to other options of the same products. Only once per
    order: the order becomes 'pending (item modified)'.

    Args:
        order_id: The order's id, such as '#W0000000'.
        item_ids: The ids of the items to change, such as ['1008292230'] (a list).
        new_item_ids: The ids of the new items, in the same order as item_ids.
        payment_method_id: The payment method that pays or receives the price difference.
    """
    order = _order(db, order_id)
    _pending(order)
    user = _user(db, order["user_id"])
    _payment_method(user, payment_method_id)
    difference = _swaps(db, order, item_ids, new_item_ids)
    _charge(user, payment_method_id, difference)
    for i, new_id in zip(_positions(order, item_ids), new_item_ids, strict=True):
        _, variant = _variant(db, new_id)
        order["items"][i].update(item_id=new_id, price=variant["price"], options=dict(variant["options"]))
    order["status"] = "pending (item modified)"
    order["payment_history"].append(
        {
            "transaction_type": "payment" if difference > 0 else "refund",
            "amount": abs(difference),
            "payment_method_id": payment_method_id,
        }
    )
    return order


def exchange_delivered_order_items(
    db: Any, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> dict[str, Any]:
    """Exchange items of a delivered order for other options of the same products; the order
    becomes 'exchange requested'. Only once per order.

    Args:
        order_id: The order's id, such as '#W0000000'.
        item_ids: The ids of the items to exchange, such as ['1008292230'] (a list).
        new_item_ids: The ids of the new items, in the same order as item_ids.
        payment_method_id: The payment method that pays or receives the price difference.
    """
    order = _order(db, order_id)
    if order["status"] != "delivered":
        raise ToolError("Non-delivered order cannot be exchanged")
    user = _user(db, order["user_id"])
    method = _payment_method(user, payment_method_id)
    difference = _swaps(db, order, item_ids, new_item_ids)
    if method["source"] == "gift_card" and difference > method["balance"]:
        raise ToolError("Insufficient gift card balance to pay for the price difference")
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = difference
    return order

