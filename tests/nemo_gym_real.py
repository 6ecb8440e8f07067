"""Run by a Python with the real ``nemo-gym`` installed (0.4 needs 3.12; see
test_nemo_gym_door.py): NeMo Gym's own ``SimpleAgent`` (its web server, its ServerClient, its
aiohttp client) collects one rollout per task row against the door and the model server, and
prints each ``/run`` answer (validated by NeMo Gym as ``SimpleAgentVerifyResponse``) as a JSON
line: ``python nemo_gym_real.py DOOR_PORT MODEL_PORT ROWS.jsonl``."""

import asyncio
import json
import socket
import sys
import threading
import time

import requests
import uvicorn
from nemo_gym.config_types import BaseServerConfig, ModelServerRef, ResourcesServerRef
from nemo_gym.server_utils import GlobalAIOHTTPAsyncClientConfig, ServerClient, set_global_aiohttp_client
from omegaconf import OmegaConf
from responses_api_agents.simple_agent.app import SimpleAgent, SimpleAgentConfig


def main() -> None:
    door_port, model_port, rows_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        agent_port = s.getsockname()[1]

    def server(kind: str, port: int) -> dict:
        return {kind: {"main": {"host": "127.0.0.1", "port": port, "entrypoint": "app.py"}}}

    config = OmegaConf.create(
        {
            "envbuilder": server("resources_servers", door_port),
            "policy_model": server("responses_api_models", model_port),
            "simple_agent": server("responses_api_agents", agent_port),
        }
    )
    agent = SimpleAgent(
        config=SimpleAgentConfig(
            host="127.0.0.1",
            port=agent_port,
            entrypoint="app.py",
            name="simple_agent",
            resources_server=ResourcesServerRef(type="resources_servers", name="envbuilder"),
            model_server=ModelServerRef(type="responses_api_models", name="policy_model"),
        ),
        server_client=ServerClient(
            head_server_config=BaseServerConfig(host="127.0.0.1", port=1), global_config_dict=config
        ),
    )
    app = agent.setup_webserver()

    @app.on_event("startup")
    async def client() -> None:  # NeMo Gym's one aiohttp client, on the server's loop
        set_global_aiohttp_client(GlobalAIOHTTPAsyncClientConfig())

    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=agent_port, log_level="warning"))
    threading.Thread(target=web.run, daemon=True).start()
    while not web.started:
        time.sleep(0.05)
    with open(rows_path) as rows:
        for line in rows:
            answer = requests.post(f"http://127.0.0.1:{agent_port}/run", json=json.loads(line), timeout=120)
            print(json.dumps({"status": answer.status_code, "body": answer.text}), flush=True)
    web.should_exit = True


if __name__ == "__main__":
    asyncio.set_event_loop(asyncio.new_event_loop())
    main()
