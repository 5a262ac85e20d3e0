"""Two claim questions (an enum and a boolean) the training tests label rows with."""

from __future__ import annotations

KINDS = ["auto", "home", "health", "travel"]
QUESTIONS = [
    {"id": "claim_type", "text": "What kind of claim is this?", "schema": {"enum": KINDS}},
    {"id": "policy_active", "text": "Is the policy active?", "schema": {"type": "boolean"}},
]
