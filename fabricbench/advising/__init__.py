"""Which GPUs and which strategy for a job, with the reasons: the study's closing prose as measured advice.

    fabricbench advise --model mistral-7b --num-gpus 4 --topo-file box.txt --gpu-memory 80G
    fabricbench advise --model dinov2-base --num-gpus 4 --results run/results.jsonl --json

memory.py says which strategies fit the GPU's memory (estimate or measured peaks), topology/ranking.py ranks the
GPU sets by the busbw they will see (measured where results have it, else from link types), strategy.py
predicts the step time (relate's model) or the communication time (volume arithmetic) per strategy, and
api.py draws the conclusion: one recommendation, its reasons and a runner-up.
The package is `advising`, never `advise`: `fabricbench.advise(...)` is the library function
(advising/api.py), and a package of the same name would replace it as an attribute once imported.
"""
