"""The typed Python SDK for a cardhour server (`CardhourClient`, `ApiError`)."""

from cardhour.client.client import CardhourClient
from cardhour.client.connection import DEFAULT_URL, ApiError

__all__ = ["DEFAULT_URL", "ApiError", "CardhourClient"]
