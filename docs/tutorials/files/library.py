"""The library's tools that change the state (envbuilder docs, tutorial "An agent with state").

Each is ``fn(db, **args)``: ``db`` is the episode's own copy of library.json. A request the
rules do not allow raises ``ToolError``: the agent reads the message and nothing changes.
"""

from typing import Any

from envbuilder.errors import ToolError

MAX_LOANS = 2


def lend_book(db: Any, member_id: str, book_id: str) -> str:
    """Lend a copy of a book to a member.

    Args:
        member_id: The member's id, e.g. m1.
        book_id: The book's id, e.g. b1.
    """
    if member_id not in db["members"]:
        raise ToolError(f"No member {member_id}")
    if book_id not in db["books"]:
        raise ToolError(f"No book {book_id}")
    member, book = db["members"][member_id], db["books"][book_id]
    if book["copies"] < 1:
        raise ToolError(f"No copy of {book['title']} is available")
    if book_id in member["loans"]:
        raise ToolError(f"{member['name']} already has {book['title']}")
    if len(member["loans"]) >= MAX_LOANS:
        raise ToolError(f"{member['name']} already has {MAX_LOANS} books on loan")
    book["copies"] -= 1
    member["loans"] = [*member["loans"], book_id]
    return f"Lent {book['title']} to {member['name']}"


def return_book(db: Any, member_id: str, book_id: str) -> str:
    """Take back a book a member has on loan.

    Args:
        member_id: The member's id, e.g. m2.
        book_id: The book's id, e.g. b3.
    """
    if member_id not in db["members"]:
        raise ToolError(f"No member {member_id}")
    member = db["members"][member_id]
    if book_id not in member["loans"]:
        raise ToolError(f"{member['name']} has no book {book_id} on loan")
    db["books"][book_id]["copies"] += 1
    member["loans"] = [b for b in member["loans"] if b != book_id]
    return f"{member['name']} returned {db['books'][book_id]['title']}"
