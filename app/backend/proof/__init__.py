"""The proof rules: evidence in, verdicts out (pure).

The names below are shared with what collects the evidence in SGLang's scheduler
(app/backend/engine/patches), so both sides spell them once.
"""

PROOF_KEY = "ling_chat_proof"
"""Where the patched scheduler publishes its evidence: a key of its init info, which a
server's `/server_info` merges in at the top level."""
FP8_HEAD_METHOD = "LingFp8LMHeadMethod"
"""The class name of ling-chat's FP8 head method, as the evidence reports the head's method."""
LACKING_FIX = (
    "these facts were recorded by an older ling-chat engine: start the engine again to record them"
)
"""The fix of a line whose facts an older engine did not record."""
