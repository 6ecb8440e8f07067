"""The running episode: answers and attempts (`Episode`, the `submit` tool), dialogue
turns (`dialogue`), the simulated user (`simulated_user`) and the tools of a session
(`toolbox`)."""

from envbuilder.episode._episode import (
    GOLD_DETAILS,
    MAX_USER_FAILURES,
    Episode,
    GradeCounts,
    Reply,
    finished_error,
    grade_metadata,
    output_of,
    reward_of,
    without_gold,
)
from envbuilder.episode._submit import SubmitTool

__all__ = [
    "GOLD_DETAILS",
    "MAX_USER_FAILURES",
    "Episode",
    "GradeCounts",
    "Reply",
    "SubmitTool",
    "finished_error",
    "grade_metadata",
    "output_of",
    "reward_of",
    "without_gold",
]
