"""`t5rank serve`: a reranking service in the two shapes RAG stacks call (text-embeddings-
inference's `POST /rerank`, Cohere's `POST /v1/rerank`), batching the requests that arrive
together.

    batcher   the bounded queue and the one worker thread that scores several requests at once
    warmup    every batch shape compiled before /health says ready
    wire      the request and answer shapes, the checks and their one-line refusals
    app       the Starlette application, uvicorn's server, SIGTERM's drain; `serve(ranker)`

    import t5rank
    from t5rank.serving import serve
    serve(t5rank.load("shipped:tk"), port=8080)

docs/serving.md has the clients (curl, requests, LangChain) and the flags.
"""

from t5rank.serving.app import make_server, serve
from t5rank.serving.wire import Limits

__all__ = ["Limits", "make_server", "serve"]
