"""Test support shipped with moot: the scripted OpenAI-compatible server and the network guard."""
