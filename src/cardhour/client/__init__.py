"""The typed Python SDK for a cardhour server (`CardhourClient`, `ApiError`)."""

from cardhour.client.client import DEFAULT_URL, ApiError, CardhourClient

__all__ = ["DEFAULT_URL", "ApiError", "CardhourClient"]
