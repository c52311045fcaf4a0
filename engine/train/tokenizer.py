"""A byte-level BPE tokenizer for the embedded model, trained on the training split only.

Byte-level with no normaliser and no prefix space means every string, including odd whitespace and
indentation, decodes back to exactly itself: the engine splices decoded middles into the user's
buffer, so a tokenizer that "cleaned up" spaces would corrupt code. The special tokens come first,
in `EMBEDDED_SPECIAL_TOKENS` order, so <pad> is id 0 as the model config assumes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from ..tokens import EMBEDDED_SPECIAL_TOKENS

VOCAB_SIZE = 4096


def train_tokenizer(texts: Iterable[str], vocab_size: int = VOCAB_SIZE) -> PreTrainedTokenizerFast:
    """Train the BPE on the given texts and wrap it as a Hugging Face fast tokenizer."""
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = None
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(EMBEDDED_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    return wrap(bpe)


def wrap(bpe: Tokenizer) -> PreTrainedTokenizerFast:
    """The `transformers` view of a trained BPE, with the roles of the special tokens set."""
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        additional_special_tokens=list(EMBEDDED_SPECIAL_TOKENS[3:]),
        clean_up_tokenization_spaces=False,
        model_max_length=8192,
    )


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, directory: str | Path) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json."""
    import json

    tokenizer.save_pretrained(str(directory))
    # transformers 5 folds the special tokens into tokenizer_config.json; older loaders and other
    # tools still look for special_tokens_map.json, so it is written explicitly as well.
    special = {
        "pad_token": tokenizer.pad_token,
        "eos_token": tokenizer.eos_token,
        "bos_token": tokenizer.bos_token,
        "additional_special_tokens": list(EMBEDDED_SPECIAL_TOKENS[3:]),
    }
    (Path(directory) / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")


def load_tokenizer(directory: str | Path) -> PreTrainedTokenizerFast:
    """Load a saved tokenizer without any network access."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(directory), local_files_only=True)


def main() -> None:
    """`python -m dg_engine.train.tokenizer OUT_DIR`: train on the stdlib training split and save."""
    import sys

    from .corpus import split

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/tokenizer")
    train, _ = split()
    tokenizer = train_tokenizer(f.text for f in train)
    save_tokenizer(tokenizer, out)
    print(f"trained on {len(train)} files, vocab {len(tokenizer)}, saved to {out}")


if __name__ == "__main__":
    main()
