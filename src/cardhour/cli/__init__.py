"""The `cardhour` command line: client commands talk to a server through `cardhour.client`;
`cardhour up` runs the server itself."""
