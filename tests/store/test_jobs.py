"""The index of submitted jobs lives as long as a job's records and never grows past them."""

from __future__ import annotations

import time

from covey import keys
from covey.store.jobs import JobIndex

TTL = 60


def test_a_submit_records_its_spec_and_drops_jobs_older_than_the_ttl(redis_client):
    index = JobIndex(redis_client, TTL)
    now = time.time()
    index.record([("old-job", {"task": "x"})], now - TTL - 1)
    index.record([("new-job", {"task": "y", "tenant": "acme"}), ("newer-job", {"task": "z"})], now)
    assert redis_client.zscore(keys.jobs(), "old-job") is None
    assert {"new-job", "newer-job"} <= set(index.newest())
    assert 0 < redis_client.ttl(keys.jobs()) <= TTL and 0 < redis_client.ttl(keys.submitted("new-job")) <= TTL
    found = index.submission("new-job")
    assert found is not None and (found.spec, found.at) == ({"task": "y", "tenant": "acme"}, now)


def test_a_job_marked_by_an_older_covey_has_no_spec_to_send_again(redis_client):
    redis_client.set(keys.submitted("marked-job"), 1, ex=TTL)
    assert JobIndex(redis_client, TTL).submission("marked-job") is None
