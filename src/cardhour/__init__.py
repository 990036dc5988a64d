"""cardhour: an open-source, self-hostable GPU cloud that sells GPUs by the card-hour."""

__version__ = "0.1.0"
