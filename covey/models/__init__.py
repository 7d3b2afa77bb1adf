"""How covey talks to a model: the OpenAI SDK client, token bounds and the sim model."""
