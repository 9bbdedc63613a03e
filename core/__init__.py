"""The engine room: model layer, embedded model, cache, ledger, records, inputs, test server."""

from moot.core.berds_metrics import mrecall_at_k, precision_at_k
from moot.core.cache import RequestCache, default_cache_path
from moot.core.debates import Debate, Speech, load_debates
from moot.core.errors import (
    ConfigError,
    ContextWindowExceeded,
    EndpointError,
    InputError,
    ModelCallError,
    MootError,
)
from moot.core.ledger import Usage, UsageLedger
from moot.core.models import Completion, ModelClient, RetryPolicy, check_reachable
from moot.core.panelbench import evaluate_panelbench, write_panelbench_report
from moot.core.perspective_diversity import PerspectiveDiversityScorer
from moot.core.qa_data import Answer, Question, load_answers, load_partial_answers, load_questions
from moot.core.records import ResultLog, stable_id
from moot.core.retrieval import Hit, Index, LocalRetriever, Retriever, build_index
from moot.core.spec import ModelSpec, Role, parse_spec
from moot.core.structured import OutputParseError, ParseFailure, Structured, parse_structured
from moot.core.topics import Topic, load_topics

__all__ = [
    "Answer",
    "Hit",
    "Index",
    "LocalRetriever",
    "PerspectiveDiversityScorer",
    "Question",
    "Retriever",
    "build_index",
    "load_answers",
    "load_partial_answers",
    "load_questions",
    "mrecall_at_k",
    "precision_at_k",
    "Completion",
    "ConfigError",
    "Debate",
    "ContextWindowExceeded",
    "EndpointError",
    "InputError",
    "ModelCallError",
    "ModelClient",
    "ModelSpec",
    "MootError",
    "OutputParseError",
    "ParseFailure",
    "RequestCache",
    "ResultLog",
    "RetryPolicy",
    "Role",
    "Speech",
    "Structured",
    "Topic",
    "Usage",
    "UsageLedger",
    "check_reachable",
    "default_cache_path",
    "evaluate_panelbench",
    "load_debates",
    "load_topics",
    "parse_spec",
    "parse_structured",
    "stable_id",
    "write_panelbench_report",
]
