"""Learners, one package per family: ``substitution`` (OS, Asy-OS), ``stream`` (the sample-stream
learners), ``averages`` (running averages), ``path`` (DFLS), ``baselines`` (batch). Each family's
``__init__`` lists its algorithms (``asyos.registry`` collects them). Shared by all: ``base`` (the
scikit-learn face), ``params`` (declared parameter constraints), ``refit``, ``budget_search`` (the
l1-to-budget search), ``spec`` (what a family registers)."""
