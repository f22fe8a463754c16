"""Imported by the worker server as it starts (a ``forkserver`` preload), before it forks any worker.

When the client started the server ahead (:func:`~advisor_core.engine.rankwork.start_server_ahead`),
the environment names the plugins the run loads: they are loaded here, once, so every
worker forks with the plugin host built and the rules imported. A failure leaves it to
each worker, which loads the plugins itself and reports what fails.
"""

from __future__ import annotations

import json
import os

from advisor_core.engine.rankwork import SERVER_PLUGINS_ENV, PluginSpec, _plugin_host


def _load_named_plugins() -> None:
    raw = os.environ.get(SERVER_PLUGINS_ENV)
    if not raw:
        return
    try:
        autoload, load, block = json.loads(raw)
        _plugin_host(PluginSpec(autoload, tuple(load), tuple(block)))
    except Exception:  # noqa: BLE001 - never stop the server: a worker loads them itself
        pass


_load_named_plugins()
