"""A NeMo Gym client written from NeMo Gym's source (github.com/NVIDIA-NeMo/Gym; NeMo Gym needs
Python >= 3.12 and this project's CI runs 3.11, so the package itself is not installed).

It does what NeMo Gym's rollout collection does with its ``simple_agent``, request for request:

* ``nemo_gym/rollout_collection.py``: read the task JSONL, one rollout per row (``num_repeats``
  times); a rollout whose ``/run`` fails is kept apart from the rewards (its "failures" file);
  afterwards ``/aggregate_metrics`` with the stripped verify responses;
* ``responses_api_agents/simple_agent/app.py`` (``run`` and ``_create_episode``): POST the row
  to the resources server's ``/seed_session`` and keep its cookies; then, until the model answers
  with a message and no function call (or ``max_steps``), POST ``responses_create_params`` with
  the outputs so far to the model's ``/v1/responses``, and for each ``function_call`` POST its
  parsed arguments to the resources server's ``/{name}`` with the cookies, the answer's text
  (whatever its status) becoming the ``function_call_output``; finally POST the row with
  ``response`` (the model's last response, its ``output`` all the outputs) to ``/verify``
  and take its ``reward``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Rollouts:
    results: list[dict[str, Any]] = field(default_factory=list)
    """Verify responses of the rollouts that succeeded (each with its ``reward``)."""
    failures: list[dict[str, Any]] = field(default_factory=list)
    """Rollouts whose run failed (``row`` and ``status``, ``detail``): no reward."""
    metrics: dict[str, Any] | None = None


class SimpleAgent:
    """NeMo Gym's ``simple_agent`` against a resources server and a Responses API model."""

    def __init__(
        self, resources_url: str, model_url: str, *, max_steps: int | None = None, headers: Any = None
    ):
        self.resources = httpx.Client(base_url=resources_url, headers=headers or {}, timeout=60)
        self.model = httpx.Client(base_url=model_url, timeout=60)
        self.max_steps = max_steps

    def close(self) -> None:
        self.resources.close()
        self.model.close()

    def _post(self, path: str, body: Any, cookies: dict[str, str]) -> httpx.Response:
        headers = {"cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())} if cookies else {}
        response = self.resources.post(path, json=body, headers=headers)
        # `resources_server_cookies = api_response.cookies`: the next call sends only the cookies
        # this answer set (a server that does not set its cookie again loses it).
        cookies.clear()
        cookies.update(response.cookies)
        return response

    def run(self, row: dict[str, Any]) -> dict[str, Any]:
        cookies: dict[str, str] = {}
        seeded = self._post("/seed_session", row, cookies)
        seeded.raise_for_status()
        params = dict(row["responses_create_params"])
        if isinstance(params.get("input"), str):
            params["input"] = [{"role": "user", "content": params["input"]}]
        outputs: list[dict[str, Any]] = []
        step = 0
        while True:
            step += 1
            answer = self.model.post("/v1/responses", json={**params, "input": params["input"] + outputs})
            answer.raise_for_status()  # model calls are expected to work
            response = answer.json()
            output = response["output"]
            outputs.extend(output)
            calls = [o for o in output if o["type"] == "function_call"]
            messages = [o for o in output if o["type"] == "message" and o.get("role") == "assistant"]
            if not calls and messages:
                break
            for call in calls:
                try:
                    arguments = json.loads(call["arguments"])
                except (json.JSONDecodeError, TypeError) as exc:
                    text = json.dumps({"error": f"Invalid tool call arguments: {exc!r}"})
                else:
                    text = self._post(f"/{call['name']}", arguments, cookies).text
                outputs.append({"type": "function_call_output", "call_id": call["call_id"], "output": text})
            if self.max_steps and step >= self.max_steps:
                break
        response["output"] = outputs
        verified = self._post("/verify", {**row, "response": response}, cookies)
        verified.raise_for_status()
        result = verified.json()
        assert isinstance(result["reward"], int | float)  # BaseVerifyResponse.reward: float
        return result


def collect(agent: SimpleAgent, rows: list[dict[str, Any]], num_repeats: int = 1) -> Rollouts:
    """Rollout collection over ``rows``: results, failures, aggregate metrics."""
    out = Rollouts()
    for task_index, row in enumerate(rows):
        for repeat in range(num_repeats):
            row = {**row, "_ng_task_index": task_index, "_ng_rollout_index": repeat}
            try:
                out.results.append(agent.run(row))
            except httpx.HTTPStatusError as exc:
                detail = exc.response.json().get("detail")
                out.failures.append({"row": row, "status": exc.response.status_code, "detail": detail})
    stripped = [
        {k: v for k, v in r.items() if k not in ("response", "responses_create_params")} for r in out.results
    ]
    metrics = agent.resources.post("/aggregate_metrics", json={"verify_responses": stripped})
    metrics.raise_for_status()
    out.metrics = metrics.json()
    return out


def read_jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]
