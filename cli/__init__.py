"""The command line (`run.py`): one module per command, each a `Command` in `cli.main.COMMANDS`.

It sits beside `steps/` and `pipelines/` because it drives ZenML: the core package `ragbench/` stays free of
the framework. The environment defaults below are set before anything imports ZenML, litellm or the
tokenizers, which read them at import time.
"""

import os

os.environ.setdefault("ZENML_ANALYTICS_OPT_IN", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
