"""The roles that speak: each module holds a role's prompts' caller and its parser."""

from moot.agents.debaters import (
    Turn,
    conclude,
    opposite,
    parse_argument_list,
    propose_arguments,
    speak,
)

__all__ = ["Turn", "conclude", "opposite", "parse_argument_list", "propose_arguments", "speak"]
