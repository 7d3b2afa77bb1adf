"""``covey ui``: covey over HTTP, for people and for services in any language."""
