"""``OpenAIEmbedder`` against a loopback server speaking ``/v1/embeddings`` (stdlib ``http.server``).

The server answers with vectors from a tiny keyword table and returns them in reverse order (the
API says rows carry an ``index``; the adapter must sort by it). Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from repertory import ModelMessage
from repertory.memory import EmbeddingError, OpenAIEmbedder, StoreMemory
from repertory.storage import InMemorySessionStore

KEYWORDS = ["oslo", "flight", "cat", "tax"]


def vector(text: str) -> list[float]:
    words = text.lower().split()
    return [float(sum(w.startswith(k) for w in words)) for k in KEYWORDS]


class EmbeddingsServer:
    """A minimal OpenAI-compatible embeddings endpoint; records every request body and header."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                if self.path != "/v1/embeddings":
                    return self._reply(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
                if any("fail" in t for t in body["input"]):
                    return self._reply(500, {"error": {"message": "the model is on fire", "type": "server_error"}})
                data = [
                    {"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(body["input"])
                ]
                self._reply(
                    200,
                    {
                        "object": "list",
                        "data": data[::-1],
                        "model": body["model"],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    },
                )

            def _reply(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> EmbeddingsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    with EmbeddingsServer() as s:
        yield s


async def test_embeds_in_input_order_in_batches(server: EmbeddingsServer) -> None:
    embedder = OpenAIEmbedder("local-embed", base_url=server.url, api_key="sk-test", batch_size=2, max_retries=0)
    texts = ["Oslo flight", "cat", "", "tax tax", "flight"]
    vectors = await embedder.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (5, 4)
    assert vectors.tolist() == [vector(t) for t in texts]
    assert [r["input"] for r in server.requests] == [["Oslo flight", "cat"], [" ", "tax tax"], ["flight"]]
    assert all(r["model"] == "local-embed" and r["encoding_format"] == "float" for r in server.requests)
    assert "dimensions" not in server.requests[0]
    assert server.headers[0]["authorization"] == "Bearer sk-test"
    assert embedder.name == "openai:local-embed"
    assert (await embedder.embed([])).shape[0] == 0
    await embedder.close()


async def test_dimensions_are_asked_for_and_named(server: EmbeddingsServer) -> None:
    embedder = OpenAIEmbedder("m", base_url=server.url, api_key="k", dimensions=4, max_retries=0)
    await embedder.embed(["cat"])
    assert server.requests[0]["dimensions"] == 4
    assert embedder.name == "openai:m:4"
    await embedder.close()


async def test_a_failing_endpoint_raises_embedding_error(server: EmbeddingsServer) -> None:
    embedder = OpenAIEmbedder("m", base_url=server.url, api_key="k", max_retries=0)
    with pytest.raises(EmbeddingError, match="the model is on fire"):
        await embedder.embed(["this will fail"])
    wrong = OpenAIEmbedder("m", base_url=server.url.removesuffix("/v1") + "/nope", api_key="k", max_retries=0)
    with pytest.raises(EmbeddingError, match="request failed"):
        await wrong.embed(["cat"])
    await embedder.close()
    await wrong.close()


async def test_store_memory_searches_with_the_endpoints_vectors(server: EmbeddingsServer) -> None:
    embedder = OpenAIEmbedder("m", base_url=server.url, api_key="k", max_retries=0)
    memory = StoreMemory(InMemorySessionStore(), resource="ada", embedder=embedder, last_messages=0, min_score=0.5)
    await memory.append(thread_id="t1", messages=[ModelMessage.user(t) for t in ["Oslo trip", "my cat", "tax forms"]])
    recalled = await memory.recall(thread_id="t2", query=[ModelMessage.user("cat food")])
    assert [m.text for m in recalled.semantic] == ["my cat"]
    # One request for the batch of three appended messages, one for the query.
    assert [r["input"] for r in server.requests] == [["Oslo trip", "my cat", "tax forms"], ["cat food"]]
    await memory.close()
    await embedder.close()


async def test_an_endpoint_failure_never_fails_the_recall(server: EmbeddingsServer) -> None:
    embedder = OpenAIEmbedder("m", base_url=server.url, api_key="k", max_retries=0)
    memory = StoreMemory(InMemorySessionStore(), resource="ada", embedder=embedder, min_score=0.5)
    await memory.append(thread_id="t1", messages=[ModelMessage.user("please fail now")])
    recalled = await memory.recall(thread_id="t2", query=[ModelMessage.user("fail again")])
    assert [m.text for m in recalled.messages] == ["please fail now"]  # stored without a vector
    assert recalled.semantic == []
    assert isinstance(memory.last_error, EmbeddingError)
    await memory.close()
    await embedder.close()


async def test_a_given_client_is_used_and_never_closed() -> None:
    requests: list[dict[str, Any]] = []

    class FakeEmbeddings:
        async def create(self, **body: Any) -> SimpleNamespace:
            requests.append(body)
            rows = [SimpleNamespace(index=i, embedding=[float(i), 1.0]) for i in range(len(body["input"]))]
            return SimpleNamespace(data=rows[::-1])  # out of order: the embedder sorts by index

    class FakeClient:
        embeddings = FakeEmbeddings()
        closed = False

        async def close(self) -> None:
            self.closed = True

    client = FakeClient()
    embedder = OpenAIEmbedder("m", client=client)
    vectors = await embedder.embed(["a", ""])
    assert vectors.tolist() == [[0.0, 1.0], [1.0, 1.0]]
    assert [(r["model"], r["input"]) for r in requests] == [("m", ["a", " "])]
    await embedder.close()
    assert not client.closed  # the caller owns a client it gave
    with pytest.raises(ValueError):
        OpenAIEmbedder("m", client=FakeClient(), batch_size=0)
