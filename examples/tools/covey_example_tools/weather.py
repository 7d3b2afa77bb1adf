"""A function tool: a typed function, its docstring, and ``@tool``."""

from pydantic import BaseModel

from covey import tool


class Weather(BaseModel):
    city: str
    temperature_c: float
    sky: str


_TODAY = {
    "paris": Weather(city="Paris", temperature_c=18.5, sky="cloudy"),
    "lisbon": Weather(city="Lisbon", temperature_c=24.0, sky="clear"),
    "oslo": Weather(city="Oslo", temperature_c=7.0, sky="rain"),
}


@tool
def lookup_weather(city: str) -> Weather:
    """Today's weather in a city.

    Args:
        city: the city's name, e.g. Paris
    """
    found = _TODAY.get(city.strip().lower())
    if found is None:  # the model reads "error: LookupError: ..." and may try another city
        raise LookupError(f"no weather for {city!r}; known: {', '.join(w.city for w in _TODAY.values())}")
    return found
