"""hire: fine-tune Transformer encoders with heads that use all of their hidden layers.

Above all HIRE, the Hidden Representation Extractor with its fusion network (Zhao & Yang), with the
paper's ablations and baselines, each a head found by name::

    from hire import build_model
    model = build_model("all-MiniLM-L6-v2", head="hire", num_labels=2)
"""

from hire.heads import build_head, describe_heads, head_names
from hire.model import HireModel, ModelConfig, ModelOutput, build_model, load_tokenizer

__version__ = "0.1.0"
__all__ = ["HireModel", "ModelConfig", "ModelOutput", "build_head", "build_model", "describe_heads",
           "head_names", "load_tokenizer"]
