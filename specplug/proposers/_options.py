"""The base of every method's options model, and the options the composites share."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class MethodOptions(BaseModel):
    """Options of one method: unknown keys and loose types are errors, not guesses."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, arbitrary_types_allowed=True)


# Options of the composites' shared choice (``_choice``), declared once and placed in hybrid's and
# adaptive's models where each lists them (the defaults are given there: pydantic takes a default
# beside an ``Annotated`` type, not inside it).

#: whether a neural part drafts all it can, so that the tokens past the cut are scored too
NeuralProbe = Annotated[
    bool | None,
    Field(
        description="ask a neural drafter for its whole draft and score the tokens past the verified cut too (None: yes, unless a neural part declares shorter_drafts_save, as a draft model does: it pays per drafted token)",
    ),
]
#: the weight of the pooled lookup estimate against a request's own lookup counts
LookupPriorWeight = Annotated[
    float,
    Field(
        gt=0, le=1e6, allow_inf_nan=False,
        description="with a cost model: observations the pooled estimate is worth against a request's own lookup counts (a lookup is scored at every step)",
    ),
]
#: the scale of the upper confidence bound that declines a neural part's calls (0: off)
CallBound = Annotated[
    float,
    Field(
        ge=0, le=100, allow_inf_nan=False,
        description="with a cost model: a neural part is not called where an upper confidence bound on its calls' accepted tokens (this scale x its draft length x sqrt(log steps / calls) above their mean) could not beat plain decoding in the shortest step (0: off)",
    ),
]

#: the weight of a lookup's own estimate against the counts of the drafts the choice would take alone
CalibrationWeight = Annotated[
    float,
    Field(
        ge=0, le=1e6, allow_inf_nan=False,
        description="with a cost model: a lookup's draft that the choice would take alone (no neural pass) is priced by what such drafts realised, pooled with this many observations of the lookup's own estimate (0: by that estimate alone)",
    ),
]
#: the weight of the pooled neural estimate against a request's own counts
NeuralRequestWeight = Annotated[
    float | None,
    Field(
        ge=0.1, le=1e6, allow_inf_nan=False,
        description="observations the pooled estimate of a neural part's acceptance is worth against a request's own counts (None: learnt from how much the finished requests differ, empirical Bayes; prior_weight until 8 have finished)",
    ),
]

#: a file of the pooled statistics an earlier run learnt, read when built and kept up to date
LearntStatePath = Annotated[
    str | None,
    Field(
        min_length=1,
        description="a file of the statistics pooled over the requests served: read when the method is built (if it exists), written every 16 finished requests, so that a restarted server starts with what it learnt (None: start from the prior)",
    ),
]
