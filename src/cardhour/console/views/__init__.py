"""What the console's templates show, one module per capability, computed from the same services
as the API."""
