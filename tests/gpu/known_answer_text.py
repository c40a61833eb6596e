"""The known answer's text: what ling-chat's decode levers do, long enough to watch it stream.

`models.py` cuts it into tokens (`pieces`). It is ASCII, and no space comes before a
punctuation mark or an apostrophe, so that a tokenizer's clean-up of spaces leaves it as it is.
"""

from __future__ import annotations

ANSWER_TEXT = """\
Here is what ran for this reply, lever by lever, and how each one is proven engaged.

## 1. Humming MXFP4 kernels for the experts

Ling-3.0-flash is a mixture of experts: 124B parameters in all, 5.1B active for each token.
Every MoE layer routes a token to 8 of its 512 experts, plus one shared expert, and the
routed experts are stored in MXFP4: four bits a weight, one shared scale for each group of 32.
Decoding one token at a time is bound by memory, not by arithmetic, so the kernel that reads
those weights sets the pace. ling-chat runs the experts on Humming (moe_runner_backend set to
humming), whose kernels read the packed weights directly and are JIT-compiled for this GPU,
then captured in CUDA graphs with the rest of the step.

What proves it: the proof looks inside the running model, not at the settings. It finds the
Humming runner core in every MoE layer of the captured graphs, so a silent fallback to another
backend would fail this line and the app would refuse to start.

## 2. The FP8 LM head

The LM head turns the last hidden state into one score per vocabulary entry: a matrix of
157,184 rows by 2,560 columns. In BF16 that is 805 MB, read in full for every token, which
is more than the active experts of a whole layer. ling-chat quantizes the head to FP8 per
output channel right after loading, so each step reads 403 MB instead, and at load it picks
the fastest FP8 kernel for this GPU among CUTLASS, torch scaled_mm and its own Triton GEMV
tilings. SGLang 0.5.23 has no switch for this: ling-chat installs it as a hook that runs
after the weights are loaded and before the graphs are captured.

What proves it: the head weight in the running model has the float8_e4m3fn type, its scales
are in place, and the kernel that runs in the graph is the one chosen at load. A self-test
at load compares its scores with those of the BF16 head, and refuses a kernel that drifts.

## 3. NEXTN speculative decoding

Ling-3.0-flash ships one NEXTN layer, a small multi-token predictor. Each round, it drafts
three tokens ahead, and the target model verifies four positions in a single forward pass:
the token it would have produced anyway, plus the three guesses. Every guess that matches is
kept, so one round can commit up to four tokens for about the cost of one. When the draft is
wrong, the round still commits the token the target chose, so the reply is exactly the one
plain decoding would give.

The draft shares the target LM head, the whole module and not just its weight. Stock SGLang
hands the draft the weight tensor alone; once the head is FP8, the draft would read those
bytes as if they were BF16, its guesses would be noise, and accept length would fall to one.
ling-chat hands over the module with its quantization method and scales, and guards the
sharing so that a wrong hand-over cannot pass unnoticed.

What proves it: the draft head *is* the target head, the same object in memory, and the
warm-up measures accept length on a greedy reply before the chat opens.

## 4. KDA ReplaySSM verify

Most layers of Ling-3.0-flash are KDA layers, a linear attention with a recurrent state
instead of a growing cache. Verifying four drafted tokens means the state must end where the
accepted tokens leave it, and not where the rejected ones would. SGLang can keep a snapshot
of the state after each drafted position and pick one, which costs memory traffic on every
round. ReplaySSM keeps a small ring of the raw inputs of the last rounds instead (a ring of
8), and folds the accepted ones into the state when a round commits. It is checked against
plain decoding: after the same reply, the state matches the one that decoding one token at a
time computes.

## How accept length is measured

Accept length is measured, not assumed:

```python
accept_length = completion_tokens / spec_verify_ct
```

SGLang counts the verify rounds of each request, ling-chat divides the tokens of the reply by
them, and the speed panel shows the result next to the histogram of how many drafts each round
accepted. The live view estimates it as the reply streams, from the tokens each chunk brings,
and the final number comes from SGLang when the reply ends. If it falls under the floor for a
few replies in a row, a banner says that speculative decoding has collapsed, and the session
numbers show it too.

## Reading the speed panel

| number | what it means |
|---|---|
| decode | tokens a second over the last second of the reply |
| average | tokens a second since the first chunk |
| TPOT | time per output token after the first one |
| TTFT | time from sending the request to the first text |
| tok/step | tokens that each verify round committed |
| accept | accept length, from the counts of SGLang |

The first token comes from the prefill, so TPOT leaves it out: it is the time from the first
text to the end of the reply, divided by the tokens after the first. Decode speed is one over
TPOT. On this model every draft token is right, so each verify round commits four tokens and
tok/step reads four.

## Why these three, on a desktop GPU

On a DGX Spark, memory bandwidth is the budget: every token reads the active experts, the
attention and the head. Humming reads the experts in their four-bit form, the FP8 head halves
the largest single read of the step, and NEXTN spreads those reads over several tokens a
round. Each lever is measured on its own in the benchmarks, and the proof refuses a run in
which any of them is missing, so a number on this screen always comes from all three.

## What the proof checks before the chat opens

The proof is a list of lines, one for each lever, and each line has evidence and a verdict.
It runs after the model has loaded and warmed up, inside the scheduler process that serves
the replies, so it sees the objects that decode with, not a copy of the configuration.

- Humming: the MoE runner of each layer, found in the captured graphs.
- FP8 head: the weight type, the scales, and the kernel picked for this GPU.
- Shared head: the draft and the target hold the same head module.
- NEXTN: three draft steps and four verify tokens, as the recipe asks.
- ReplaySSM: the ring is on, and its length is a power of two.
- Accept length: the greedy warm-up reaches the floor; a draft that guesses at random does not.

A line that fails stops the start with one message that says which lever is missing and why.
`ling-chat doctor` prints the same report and exits without opening the chat, and the bench
records it next to every run, so that a table of speeds always says what was engaged.

## Where the time goes in one step

A decode step on this model reads the dense layers, the attention of every layer, the routed
and shared experts that the router picked, and then the head. With speculative decoding, one
verify round reads them once for four positions, and the draft layer adds a little on top.
The roofline in the benchmarks divides the bytes of a step by the time it took, and compares
that with the bandwidth of the GPU: on the Spark, about 273 GB per second. A step that reads
fewer bytes, or reads them for more tokens at once, is a faster reply.

## Things to try now

1. Ask another question: the demo plays the next recorded reply with its recorded timing.
2. Press Esc while it streams: the reply stops at once, and the part that arrived is stored.
3. Open the chat list and search your chats: replies are saved in SQLite as they stream.
4. Run it again with a slower replay speed to watch each chunk land: the numbers stay true.

## What this recording is

This reply was recorded on an H200 with the default profile, stack, on a six-layer model
that has the shapes of Ling-3.0-flash but weights written so that its answer is known in
advance: the greedy continuation walks a fixed path through the vocabulary, and the NEXTN
layer predicts that path exactly. That is why the text you read is this description and why
accept length sits near four. The speeds you see are the ones measured while it was recorded:
a replay at another speed says so at the top, and still reports the recorded numbers.

Press Esc while a reply streams to stop it: what arrived is kept and marked stopped.
Every draft token of this model is right, so each verify round commits four tokens.
"""
