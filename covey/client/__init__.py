"""The client: submit jobs, follow them, say why one waits."""

from covey.client.client import Client, JobHandle

__all__ = ["Client", "JobHandle"]
