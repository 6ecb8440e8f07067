"""The Python version of envs/tau2_retail.yaml's tools, kept to measure the declarative ones
against (bench/agents.py --python): the eleven function tools the spec had before its tools
became declarative steps. Each is ``fn(db, **args)``, where ``db`` is the episode's copy of the
shop's database (``users``, ``orders``, ``products``); a request the policy does not allow
raises ``ToolError``.
"""

from __future__ import annotations

from typing import Any

from envbuilder.errors import ToolError

CANCEL_REASONS = ("no longer needed", "ordered by mistake")


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


def get_item_details(db: Any, item_id: str) -> dict[str, Any]:
    """Get the details of a variant item (its product, options, availability and price).

    Args:
        item_id: The item's id, such as '6086499569'.
    """
    product, variant = _variant(db, item_id)
    return {"product_id": product["product_id"], "name": product["name"], **variant}


def list_all_product_types(db: Any) -> dict[str, str]:
    """List the name and product id of every product type the shop sells."""
    names = {db["products"].peek(pid)["name"]: pid for pid in db["products"]}
    return dict(sorted(names.items()))


def cancel_pending_order(db: Any, order_id: str, reason: str) -> dict[str, Any]:
    """Cancel a pending order. The user must have confirmed the order id and the reason.

    Args:
        order_id: The order's id, such as '#W0000000' (with the '#').
        reason: Either 'no longer needed' or 'ordered by mistake'.
    """
    order = _order(db, order_id)
    if order["status"] != "pending":
        raise ToolError("Non-pending order cannot be cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolError("Invalid reason")
    user = _user(db, order["user_id"])
    refunds = []
    for payment in order["payment_history"]:
        if payment["transaction_type"] == "payment":
            refunds.append(
                {
                    "transaction_type": "refund",
                    "amount": payment["amount"],
                    "payment_method_id": payment["payment_method_id"],
                }
            )
            if payment["payment_method_id"] in user["payment_methods"]:
                _charge(user, payment["payment_method_id"], -payment["amount"])
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return order


def modify_pending_order_address(
    db: Any, order_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> dict[str, Any]:
    """Change the shipping address of a pending order (after the user's explicit confirmation).

    Args:
        order_id: The order's id, such as '#W0000000'.
        address1: The first line of the address, such as '123 Main St'.
        address2: The second line, such as 'Apt 1', or ''.
        city: The city, such as 'San Francisco'.
        state: The state, such as 'CA'.
        country: The country, such as 'USA'.
        zip: The zip code, such as '12345'.
    """
    order = _order(db, order_id)
    _pending(order)
    order["address"] = _address(address1, address2, city, state, country, zip)
    return order


def _address(address1: str, address2: str, city: str, state: str, country: str, zip: str) -> dict[str, str]:
    return {
        "address1": address1,
        "address2": address2,
        "city": city,
        "state": state,
        "country": country,
        "zip": zip,
    }


def modify_pending_order_payment(db: Any, order_id: str, payment_method_id: str) -> dict[str, Any]:
    """Pay a pending order with another of the user's payment methods (the old one is refunded).

    Args:
        order_id: The order's id, such as '#W0000000'.
        payment_method_id: The new payment method's id, such as 'gift_card_0000000'.
    """
    order = _order(db, order_id)
    _pending(order)
    user = _user(db, order["user_id"])
    _payment_method(user, payment_method_id)
    payments = [p for p in order["payment_history"] if p["transaction_type"] == "payment"]
    if len(payments) != 1:
        raise ToolError("There should be exactly one payment for a pending order")
    old = payments[0]
    if old["payment_method_id"] == payment_method_id:
        raise ToolError("The new payment method should be different from the current one")
    amount = old["amount"]
    _charge(user, payment_method_id, amount)
    if old["payment_method_id"] in user["payment_methods"]:
        _charge(user, old["payment_method_id"], -amount)
    order["payment_history"].extend(
        [
            {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
            {"transaction_type": "refund", "amount": amount, "payment_method_id": old["payment_method_id"]},
        ]
    )
    return order


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


def modify_user_address(
    db: Any, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> dict[str, Any]:
    """Change a user's default address (after the user's explicit confirmation).

    Args:
        user_id: The user's id, such as 'sara_doe_496'.
        address1: The first line of the address, such as '123 Main St'.
        address2: The second line, such as 'Apt 1', or ''.
        city: The city, such as 'San Francisco'.
        state: The state, such as 'CA'.
        country: The country, such as 'USA'.
        zip: The zip code, such as '12345'.
    """
    user = _user(db, user_id)
    user["address"] = _address(address1, address2, city, state, country, zip)
    return user


def return_delivered_order_items(
    db: Any, order_id: str, item_ids: list[str], payment_method_id: str
) -> dict[str, Any]:
    """Return items of a delivered order; the order becomes 'return requested'.

    Args:
        order_id: The order's id, such as '#W0000000'.
        item_ids: The ids of the items to return, such as ['1008292230'] (a list).
        payment_method_id: Where the refund goes: the original payment method or a gift card.
    """
    order = _order(db, order_id)
    if order["status"] != "delivered":
        raise ToolError("Non-delivered order cannot be returned")
    user = _user(db, order["user_id"])
    method = _payment_method(user, payment_method_id)
    original = order["payment_history"][0]["payment_method_id"]
    if method["source"] != "gift_card" and payment_method_id != original:
        raise ToolError("Payment method should be the original payment method or a gift card")
    _positions(order, item_ids)
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
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


def transfer_to_human_agents(db: Any, summary: str) -> str:
    """Transfer the user to a human agent, with a summary of the issue. Only when the request
    cannot be handled with the other tools.

    Args:
        summary: A summary of the user's issue.
    """
    return "Transfer successful"
