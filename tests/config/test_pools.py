"""covey's Redis connections pack commands in one call to hiredis
(``covey.config.pools.OneCallPacker``): the same bytes on the wire as redis-py's
own packer, the same refusals, and real Redis reads back what was written."""

from __future__ import annotations

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from redis.connection import PythonRespSerializer

from covey.config import connections
from covey.config.pools import BUFFER_CUTOFF, OneCallPacker, packing

redis_pys = PythonRespSerializer(BUFFER_CUTOFF, redis.connection.Encoder("utf-8", "strict", False).encode)
argument = st.one_of(
    st.text(),
    st.binary(),
    st.integers(),
    st.floats(),
    st.binary().map(bytearray),
    st.binary().map(memoryview),
)


@given(name=st.sampled_from(["SET", b"EVALSHA", "SCRIPT LOAD", b"CONFIG GET", "hset"]), args=st.lists(argument))
def test_a_command_is_packed_to_the_bytes_redis_py_packs(name, args):
    assert b"".join(OneCallPacker().pack(name, *args)) == b"".join(bytes(c) for c in redis_pys.pack(name, *args))


@pytest.mark.parametrize("bad", [True, None, object()])
def test_an_argument_redis_py_refuses_is_refused_with_its_error(bad):
    with pytest.raises(redis.DataError, match="Invalid input of type"):
        OneCallPacker().pack("SET", "k", bad)


def test_a_text_that_is_not_utf8_is_refused():
    with pytest.raises(UnicodeEncodeError):
        OneCallPacker().pack("SET", "k", "\udc80")


def test_connections_with_another_encoding_keep_redis_pys_packer():
    assert "command_packer" not in packing({"encoding": "latin-1"})
    assert isinstance(packing({})["command_packer"], OneCallPacker)


def test_a_worker_client_writes_and_reads_back_through_the_packer(redis_server):
    client = connections.patient_client(redis_server.url, 1, 5)
    assert isinstance(client.connection_pool.connection_kwargs["command_packer"], OneCallPacker)
    value = "ünï\x00code " * 2000  # past the cutoff where redis-py sends a value as a chunk of its own
    client.hset("covey-test:packed", mapping={"text": value, "int": 7, "float": 0.1})
    assert client.execute_command("CONFIG GET", "port") == {"port": str(redis_server.port)}
    assert client.hgetall("covey-test:packed") == {"text": value, "int": "7", "float": "0.1"}
    client.delete("covey-test:packed")
