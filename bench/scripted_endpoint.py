#!/usr/bin/env python3
"""A scripted OpenAI-compatible endpoint that knows the gold answers: for README examples and benches.

It reads the first ``--tasks`` tasks of each spec's test split, maps each prompt to its gold
answer (the spec's ``gold:`` template, else the grader's target, as ``envbuilder check`` does)
and answers right on a ``--right`` share: at temperature 0 the same prompts every time (by a hash
of the prompt), above it a new seeded draw per request (so samples differ). With tools in the
request it calls ``submit``; without (``--answer text``) it answers in plain text:
``The answer is …``.

    python bench/scripted_endpoint.py envs/gsm8k.yaml envs/math500.yaml --port 8123 --right 0.7
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def gold_answers(specs: list[Path], tasks: int) -> dict[str, str]:
    """Prompt text → gold answer, for the first ``tasks`` test tasks of each spec."""
    from envbuilder.environment import load_environment
    from envbuilder.templating import Template

    out: dict[str, str] = {}
    for spec in specs:
        env = load_environment(spec)
        assert env.submit is not None
        template = (
            Template(env.spec.gold, name="gold", base_dir=env.loaded.base_dir) if env.spec.gold else None
        )
        view = env.split("test")
        for index in range(min(tasks, len(view))):
            task = view.task(index)
            if template is not None:
                gold = template.render(task)
            else:
                target = env.submit.target(task)
                gold = str(target[0] if isinstance(target, list | tuple) else target)
            prompt = "".join(b.text for m in env.messages(task) if m.role == "user" for b in m.blocks
                             if getattr(b, "text", None))  # fmt: skip
            out[prompt] = gold
    return out


def app(golds: dict[str, str], right: float) -> Any:
    rng = random.Random(0)
    ids = itertools.count(1)

    def answer(body: dict[str, Any]) -> bytes:
        prompt = "".join(
            m["content"] if isinstance(m.get("content"), str)
            else "".join(p.get("text", "") for p in m.get("content") or [] if isinstance(p, dict))
            for m in body.get("messages", []) if m.get("role") == "user"
        )  # fmt: skip
        gold = next((g for p, g in golds.items() if p and p in prompt), None)
        # at temperature 0 the same prompt gets the same answer; above, each sample is a new draw
        hot = (body.get("temperature") or 0) > 0
        share = rng.random() if hot else int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        said = gold if gold is not None and share < right else "0"
        if body.get("tools"):
            call = {"id": "c1", "type": "function",
                    "function": {"name": "submit", "arguments": json.dumps({"answer": said})}}  # fmt: skip
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        else:
            message = {"role": "assistant", "content": f"The answer is {said}"}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        finish = "tool_calls" if body.get("tools") else "stop"
        choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        # every field the chat-completions schema requires (openai's ChatCompletion, which
        # verifiers' client parses replies into, refuses a reply without `created` or `model`)
        reply = {
            "id": f"chatcmpl-{next(ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or "scripted"),
            "choices": [choice],
            "usage": usage,
        }
        return json.dumps(reply).encode()

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw, more = b"", True
        while more:
            event = await receive()
            raw += event.get("body", b"")
            more = event.get("more_body", False)
        body = answer(json.loads(raw)) if raw else b"{}"
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})

    return asgi


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("specs", nargs="+", type=Path)
    ap.add_argument("--port", type=int, default=8123)
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--right", type=float, default=0.7)
    args = ap.parse_args()
    golds = gold_answers(args.specs, args.tasks)
    print(f"scripted endpoint: {len(golds)} prompts, right on {args.right:.0%}", file=sys.stderr)
    uvicorn.run(app(golds, args.right), host="127.0.0.1", port=args.port, log_level="warning", backlog=2048)


if __name__ == "__main__":
    main()
