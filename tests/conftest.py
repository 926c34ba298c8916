"""Each test session gets its own ZenML store, set before zenml is imported anywhere."""

import os
import sys
import tempfile
from pathlib import Path

_SESSION_DIR = Path(tempfile.mkdtemp(prefix="ragbench-tests-"))
os.environ["ZENML_CONFIG_PATH"] = str(_SESSION_DIR / "zenml")
os.environ.setdefault("ZENML_ANALYTICS_OPT_IN", "false")
os.environ.setdefault("ZENML_LOGGING_VERBOSITY", "WARN")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# No machine here reaches the Hub; without these, datasets/transformers spend ~20 s per call retrying.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
