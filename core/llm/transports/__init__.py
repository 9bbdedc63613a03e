"""The built-in transports, one module each, registered on import (`spec.register_transport`).

``local/`` the embedded demo model (`embedded`), ``hf/`` a model run in process by transformers
or vLLM (`hf`), ``openai/`` and ``hosted_vllm/`` any OpenAI-compatible server (`openai`), and
every other provider litellm knows (`litellm`); a model with several endpoints or a ``--router``
file is sent through a litellm Router (`router`). `moot.core.llm` imports this package, so a
spec always finds its transport.
"""

from moot.core.llm.transports import embedded, hf, litellm, openai

__all__ = ["embedded", "hf", "litellm", "openai"]
