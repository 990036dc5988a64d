"""`cardhour admin hosts …` and `cardhour agent`: GPU servers joining the fleet."""
