"""The explanation of attention on an A100, as Markdown.

Covers:
  - `tilesim.explain.build_explanation`: the story as data (sections with the
    numbers they cite), from the predictions of every algorithm and scenario
  - `tilesim.explain_render.render_markdown`
  - reading one number back out of the data

Scenario:
  A teacher prepares a handout on why FlashAttention is fast, and why v3 does
  not exist on an A100, with numbers from a small shape.
"""

from tilesim.explain import build_explanation, main_workload
from tilesim.explain_render import render_markdown
from tilesim.hwmodels import load_gpu

GPU = "a100"  # preset alias
SEQLEN = 1024  # tokens per sequence
HEAD_DIM = 64  # elements per head
BATCH = 2  # sequences
HEADS = 8  # attention heads


def main() -> None:
    gpu = load_gpu(GPU)
    workload = main_workload(gpu, SEQLEN, HEAD_DIM, BATCH, HEADS, causal=False, dtype="fp16")
    explanation = build_explanation(gpu, workload)
    print(render_markdown(explanation), end="")
    v2 = explanation.section("v2").numbers
    print(f"\nv2 over standard: {v2['speedup_vs_standard']:.2f}x")


if __name__ == "__main__":
    main()
