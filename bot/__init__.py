"""The application: the top floor, where a running bot is assembled and operated.

It owns the runtime (:mod:`bot.runtime`), the platform adapters
(:mod:`bot.adapters`), the command line (:mod:`bot.cli` and its ``cli_*``
siblings), the operator's endpoints and metrics (:mod:`bot.ops`,
:mod:`bot.metrics`), chat commands (:mod:`bot.commands`) and live config reload
(:mod:`bot.reload`).  It may import every package below it (``channels``,
``branches``, ``workers``, ``compactor``, ``memory_graph`` and the kernel
``tierbot``); nothing imports it.
"""
