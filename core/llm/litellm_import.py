"""Import litellm offline.

``import litellm`` fetches its cost map over the network unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is
set first, and costs 3-4 s; import it from here, lazily, and only where a litellm provider is used.
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_LOG", "ERROR")

import litellm  # noqa: E402

litellm.suppress_debug_info = True
litellm.telemetry = False

__all__ = ["litellm"]
