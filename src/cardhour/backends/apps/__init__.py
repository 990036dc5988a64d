"""Where marketplace apps run: one process per replica serving the app's entrypoint over HTTP
(`runner.py`), started and stopped by `process.py`, routed to and scaled by `LocalAppRuntime`
(`runtime.py`, the `core.replicas.AppRuntime` of this deployment)."""
