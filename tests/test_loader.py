"""Loading: every way a model can be wrong gets its own clear error; int8 really saves memory."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from dg_engine import (
    DeviceUnavailableError,
    EngineConfig,
    ModelNotFoundError,
    OutOfMemoryError,
    UnsafeWeightsError,
    UnsupportedOptionError,
    WrongArchitectureError,
    load_engine,
)
from dg_engine.prompt import ChatFormat, FimFormat, choose_format


def test_loads_a_model_directory(tiny_dir):
    engine = load_engine(EngineConfig(model=str(tiny_dir)))
    info = engine.info()
    assert info["format"] == "fim" and info["device"] == "cpu" and info["dtype"] == "float32"


def test_missing_directory(tmp_path):
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        load_engine(EngineConfig(model=str(tmp_path / "nowhere")))


def test_uncached_hub_id_is_not_downloaded():
    with pytest.raises(ModelNotFoundError, match="not in the local Hugging Face cache"):
        load_engine(EngineConfig(model="nobody/no-such-model-dg-lsp"))


def test_pickle_only_weights_are_refused(tiny_dir, tmp_path):
    target = tmp_path / "pickled"
    shutil.copytree(tiny_dir, target)
    (target / "model.safetensors").unlink()
    (target / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(UnsafeWeightsError, match="safetensors only"):
        load_engine(EngineConfig(model=str(target)))


def test_other_architecture_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(WrongArchitectureError, match="'llama' model"):
        load_engine(EngineConfig(model=str(tmp_path)))


def test_not_a_model_directory(tmp_path):
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        load_engine(EngineConfig(model=str(tmp_path)))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown on machines without a GPU")
def test_cuda_requested_but_absent(tiny_dir):
    with pytest.raises(DeviceUnavailableError, match="no CUDA GPU"):
        load_engine(EngineConfig(model=str(tiny_dir), device="cuda"))


def test_gpu_quantization_on_cpu_is_a_clear_error(tiny_dir):
    with pytest.raises(UnsupportedOptionError, match="needs a CUDA GPU"):
        load_engine(EngineConfig(model=str(tiny_dir), device="cpu", quantization="fp8"))


def test_out_of_memory_while_loading(tiny_dir, monkeypatch):
    from transformers import DiffusionGemmaForBlockDiffusion

    def boom(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 18.00 GiB")

    monkeypatch.setattr(DiffusionGemmaForBlockDiffusion, "from_pretrained", boom)
    with pytest.raises(OutOfMemoryError, match="out of memory while loading"):
        load_engine(EngineConfig(model=str(tiny_dir)))


def test_int8_cuts_memory_and_still_fills(tiny_dir):
    from dg_engine import FillRequest

    full = load_engine(EngineConfig(model=str(tiny_dir)))
    int8 = load_engine(EngineConfig(model=str(tiny_dir), quantization="int8"))
    assert int8.memory_bytes < 0.75 * full.memory_bytes
    result = int8.fill(FillRequest("x = ", "\n"))
    assert result.candidates[0].steps >= 1


def test_invalid_options_fall_back_with_messages():
    config, problems = EngineConfig.from_mapping({"device": "tpu", "maxSteps": 3, "max_steps": -1, "canvas_length": 24})
    assert config.device == "auto" and config.max_steps == 0 and config.canvas_length == 24
    assert len(problems) == 2 and any("'device'" in p for p in problems)


def test_automatic_thread_count_leaves_a_core_to_the_server():
    auto = EngineConfig()
    assert [auto.torch_threads(cores) for cores in (1, 2, 3, 8, 64)] == [1, 1, 2, 4, 4]
    assert EngineConfig(threads=6).torch_threads(2) == 6
    config, problems = EngineConfig.from_mapping({"threads": -3})
    assert config.threads == 0 and problems


def test_prompt_format_is_chosen_from_the_tokenizer(tiny):
    _, tokenizer = tiny
    fim = choose_format(tokenizer)
    assert isinstance(fim, FimFormat)
    ids = fim.infill_ids("PRE", "SUF", chunks=("OTHER",))
    s = fim.specials
    order = [ids.index(t) for t in (s.file_separator, s.fim_suffix, s.fim_prefix, s.fim_middle)]
    assert order == sorted(order) and ids[0] == s.bos and ids[-1] == s.fim_middle


def test_chat_format_for_tokenizers_without_sentinels():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: i for i, c in enumerate(["<pad>", "<eos>", "<bos>", *"abcdefghijklmnopqrstuvwxyz :\n<>|{}()=+"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>")
    hf.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    fmt = choose_format(hf)
    assert isinstance(fmt, ChatFormat)
    assert len(fmt.infill_ids("a = ", "\nb")) > 10
