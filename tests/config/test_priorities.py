"""One meaning of a job's priority (9 the most urgent), as each broker orders it."""

from __future__ import annotations

from covey.config import priorities
from covey.config.celery import celery_config
from covey.config.settings import Settings


def test_redis_pops_lower_levels_first_so_a_priority_is_nine_minus_it_there():
    assert [priorities.on_broker(p, redis_broker=True) for p in (0, 4, 9)] == [9, 5, 0]


def test_rabbitmq_serves_higher_numbers_first_so_a_priority_goes_as_it_is():
    assert [priorities.on_broker(p, redis_broker=False) for p in (0, 4, 9)] == [0, 4, 9]


def test_a_queue_is_a_list_per_level_the_most_urgent_under_its_own_name():
    lists = priorities.lists("covey")
    assert lists[0] == "covey" and lists[1:] == [f"covey\x06\x16{level}" for level in range(1, 10)]


def test_both_brokers_are_configured_for_ten_levels():
    conf = celery_config(Settings(redis_url="redis://localhost:6379/0"))
    assert conf["broker_transport_options"]["priority_steps"] == list(range(10))
    assert conf["task_queue_max_priority"] == 9  # RabbitMQ queues declared with x-max-priority
