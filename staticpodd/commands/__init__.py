"""staticpodctl's verbs, one module per family, as pipx keeps one module per subcommand.

``status``, ``park`` (park, unpark), ``apply`` (apply, rollback), ``edit``, ``history``
(history, show, diff), ``recover``, ``prune``, ``validate`` and ``doctor`` each hold a
``cmd_<verb>(args, out) -> exit status``; :mod:`.parser` builds the argument parser for the verb
asked, :mod:`.output` is what they print (``--json``), :mod:`.loading` builds the layout, the
configuration and the engine, :mod:`.changing` is what the changing verbs share (the result, the
``--wait`` proof) and :mod:`.health` reads the daemon's heartbeat. :mod:`staticpodd.cli` parses
and dispatches. Nothing is imported here: a run imports only its own verb's module.
"""
