"""The levers of the draft and its verify: NEXTN, DSpark, the FP8 draft, KDA ReplaySSM."""
