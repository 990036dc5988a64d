"""Where marketplace apps run: one process per replica serving the app's entrypoint over HTTP
(`runner.py`), started and stopped by `LocalAppRuntime` (`runtime.py`)."""
